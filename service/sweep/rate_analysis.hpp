#pragma once
// Internal to sweep/: a rate sweep's (and a check's) stored steps read back for planning
// (orchestrator.cpp) and for its result (sweep_result.cpp): each fixed rate's verdict with its
// re-runs folded in, the baseline and the probe, the ladder, and the bracket of passing and
// failing rates.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sweep/orchestrator.hpp"
#include "sweep/step.hpp"

namespace capsweep::sweep {

// Why a fixed-rate step is run a second time before its verdict may count.
enum class RerunReason { none, inconclusive, unavailable, non_monotone };

// A fixed rate's verdict once any re-run is folded in.
struct RateResult {
  double rate = 0;
  Verdict verdict = Verdict::fail;
  const StepOutcome* step = nullptr;
  bool escalation = false;  // ladder-kind step beyond the planned ladder
  bool scout = false;       // a short scouting step: its fail counts, its pass is never claimed
  bool via_rerun = false;
  RerunReason rerun_for = RerunReason::none;  // asked for, not yet run when !via_rerun
};

struct Analysis {
  const StepOutcome* baseline = nullptr;
  const StepOutcome* probe = nullptr;
  const StepOutcome* check = nullptr;
  LadderRange range;
  std::vector<double> ladder;
  std::vector<RateResult> fixed;  // in run order
  int fixed_steps_run = 0;        // re-runs included
  int ladder_done = 0;
  std::optional<StepOrder> pending_rerun;
  bool inconclusive_twice = false;
  bool generator_limited = false;
  std::vector<const StepOutcome*> unavailable_twice;  // outage on the step and its re-run
  int non_monotone_reruns = 0;
  std::map<std::string, double> wall_by_phase;  // seconds of the stored steps, by phase
};

// The lowest failing full-length rate (else scouting rate), and the highest full-length
// passing rate below it; a scout's fail also bounds the answer when it lies above that pass.
struct Bracket {
  const RateResult* pass = nullptr;
  const RateResult* fail = nullptr;
};

Analysis analyse(const JobSpec& spec, const std::vector<StepOutcome>& steps);
// A fixed-rate step at `rate` of the spec's length (times `factor`), stretched to hold the
// samples its percentile bounds need; a scout's is the scouting length.
StepOrder rate_step_order(const JobSpec& spec, StepKind kind, std::string phase, double rate, int factor);
StepOrder scout_step_order(const JobSpec& spec, double rate);
// A scouting sweep's next step once its baseline and probe have run (sweep/scout.cpp).
Action next_scout_action(const JobSpec& spec, const Analysis& a);
// Steps still to come (at least one) of a scouting sweep.
int scout_progress(const JobSpec& spec, const Analysis& a);
// How a sweep spent its time and what its step length resolves: the result's "search" block.
nlohmann::json search_block(const JobSpec& spec, const Analysis& a);
Bracket bracket_of(const Analysis& a);
// Failed fixed rates in a row at the end of the ladder (escalations skipped).
int trailing_failures(const Analysis& a);

// A rate sweep's result: the max SLO rate, the bracket, the knee, saturation, warnings.
nlohmann::json sweep_result(const JobSpec& spec, const Analysis& a, std::vector<std::string> warnings);
// A check's result from its one step.
nlohmann::json check_result(const JobSpec& spec, const StepOutcome& s);

}  // namespace capsweep::sweep

#pragma once
// The step types every part of a job shares: what kind a step is, the order to run one (what
// a planner asks for), and what a planner reads back of a stored one. Plain data; the
// planners (orchestrator, levels, regression, scenario), the manager and the store's rows
// meet here.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "core/slo.hpp"
#include "core/time.hpp"
#include "sweep/spec.hpp"

namespace capsweep::sweep {

// run: a regression job's timed run of one side; quality: its answers to the quality items;
// scenario: a scenario job's whole profile.
enum class StepKind { baseline, probe, ladder, refine, check, level, run, quality, scenario };
std::string_view to_string(StepKind k) noexcept;
std::optional<StepKind> parse_step_kind(std::string_view s) noexcept;

// What the orchestrator reads of a stored step.
struct StepOutcome {
  StepKind kind = StepKind::ladder;
  double offered_rate_rps = 0;              // 0 for baseline and probe
  Verdict verdict = Verdict::inconclusive;  // SLO verdict, saturation included
  bool rerun = false;                       // the longer re-run of an inconclusive step
  bool saturated = false;
  bool unavailable = false;  // failed on connection/5xx/cut-stream errors: availability, not capacity
  bool generator_limited = false;
  bool scout = false;            // a short step of a scouting search: its pass is never claimed
  double wall_s = 0;             // the step's wall time, warm-up and drain included (0: not stored)
  double measured_rate_rps = 0;  // baseline: r_sync; probe: r_max; else completions per second
  std::uint32_t users = 0;       // closed-loop steps (level): the users kept in flight
  double completion_ratio = 1;   // completions / scheduled in the window
  std::uint64_t completed = 0;
  std::uint64_t measured = 0;
  std::string limiting_metric;  // the limiting criterion's name ("" when none)
  double limiting_value = 0;    // its measured value
  double p95_ttft_ms = 0;
  double mean_e2el_ms = 0;
  std::optional<double> server_in_system;                // mean scraped running + waiting
  std::optional<Role> role;                              // regression steps: whose run
  int round = 0;                                         // regression: the round (quality: the pass)
  nlohmann::json summary = nlohmann::json::object();     // the step summary as stored
  nlohmann::json evaluation = nlohmann::json::object();  // SLO criteria as stored

  nlohmann::json to_json() const;
  static std::optional<StepOutcome> from_json(const nlohmann::json& j);
};

// One step to run.
struct StepOrder {
  StepKind kind = StepKind::ladder;
  std::string phase;    // "baseline", "probe", "ladder", "escalate", "refine", "scout", "confirm", "check", "level"
  double rate_rps = 0;  // fixed-rate steps and check (inf for all_at_once)
  Nanos duration{0};    // measured part (0: count-based)
  Nanos warmup{0};
  std::optional<std::uint64_t> requests;  // count-based steps
  std::uint32_t concurrency = 0;          // baseline and closed loops: users; else a cap (0: none)
  bool closed_loop = false;               // a check of N users (concurrency), not a rate
  bool rerun = false;
  bool scout = false;        // a short step that only locates the bracket (sweep.search "scout")
  std::optional<Role> role;  // regression steps: which side runs (none: the job's target)
  int round = 0;             // regression: the round of a run, the pass of a quality step
  Nanos pause_before{0};     // wait this long before the step (a regression's cooldown)
  bool decided = false;  // step.stop "decided": the step may end once its verdict is decided; duration is its longest
};

// A number as JSON: null when absent or not finite (JSON has no infinity).
nlohmann::json number_or_null(std::optional<double> v);

// What a job's planner says next: run this step, finish with this result, or fail.
struct Finish {
  nlohmann::json result;
};

struct Fail {
  std::string reason;
};

using Action = std::variant<StepOrder, Finish, Fail>;

// Estimated steps in all (done + to come) and the phase, for progress reports.
struct Plan {
  int steps_planned = 0;
  std::string phase;
};

}  // namespace capsweep::sweep

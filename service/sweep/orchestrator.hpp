#pragma once
// The rate sweep (and a check job's one step) as a sans-I/O state machine: given the spec and the steps already stored,
// what to do next. Recovery after a crash is "load the stored steps and ask again"; tests fabricate step outcomes and
// check every decision without a socket.
//
//   baseline (synchronous, N requests)      -> r_sync
//   throughput probe (N at once, cap C)     -> r_max from the steady part
//   ladder: K rates up to r_max             -> stops after `stop_after_failures` failures in a row
//   escalation above r_max (x factor)       -> only while every rate so far passed
//   refinement: bisection pass..fail        -> until (fail - pass) / pass <= tolerance
//   finish: max SLO rate, bracket, knee, saturation, concurrency at capacity
// An inconclusive fixed-rate step is re-run once, twice as long; inconclusive again counts as
// failing (a rate is only claimed when it was shown to pass).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/slo.hpp"
#include "sweep/spec.hpp"
#include "sweep/step.hpp"

namespace capsweep::sweep {

// A rate sweep's next step (or its finish) from its stored steps, and its progress.
Action next_rate_action(const JobSpec& spec, const std::vector<StepOutcome>& steps);
Plan rate_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps);
// A check job's one step, then its result.
Action next_check_action(const JobSpec& spec, const std::vector<StepOutcome>& steps);

// The ladder's range from the baseline and the probe: [r_sync, r_max], widened to
// [r/2, 1.5 r] when the probe is not at least 10% faster than the baseline.
struct LadderRange {
  double lo = 0, hi = 0;
  bool probe_not_faster = false;
};
LadderRange ladder_range(double r_sync, double r_max);
// The K ladder rates: K-1 rates strictly between lo and hi, then hi itself.
std::vector<double> ladder_plan(const SweepSettings& s, const LadderRange& range);

}  // namespace capsweep::sweep

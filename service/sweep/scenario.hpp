#pragma once
// The scenario job (kind "scenario"), sans I/O: one step that sends the whole profile, whose
// windows are stored as they close, then the verdict of each check named in the spec from the
// stored windows and the events seen (spike, readiness flips, replica changes, the first
// token). Each check answers {"verdict", "measured", "bound", "unit", "windows": [first,
// last], "detail"}; the job's verdict is the worst of them (metric_choice is advisory).
//
// A window row, as stored: core/windows' figures, plus "ready", "desired", "serving" (the
// replica counts read at its end; null when not read), "readiness" (the readiness URL's last
// answer in it: true for 200) and "server" (each gauge of the target's metrics text, the mean
// over its series).

#include <nlohmann/json.hpp>
#include <vector>

#include "core/profile.hpp"
#include "core/windows.hpp"
#include "sweep/step.hpp"

namespace capsweep::sweep {

Action next_scenario_action(const JobSpec& spec, const std::vector<StepOutcome>& steps);

// The start of the first segment whose rate goes above the capacity (nullopt without a
// capacity, or when none does).
std::optional<double> spike_start_s(const JobSpec& spec, const Profile& profile);

// The result from the stored windows, the events and the earliest requests of the step (the
// readiness check lists and judges the requests after each moment the target became ready):
// result.verdict, result.checks.<name>, result.events, result.summary, result.conditions.
// `generator_limited`: the load generator fell behind the profile's schedule; a pass is then
// inconclusive and a warning says why.
nlohmann::json scenario_result(const JobSpec& spec, const Profile& profile, const std::vector<nlohmann::json>& windows,
                               const nlohmann::json& events, const EarliestRequests& requests = EarliestRequests(),
                               bool generator_limited = false);

}  // namespace capsweep::sweep

// The scenario kind: a load profile sent as one step and judged window by window (spike
// reaction, SLO while scaling, cold start, readiness, scale-down, flapping). Its block:
// "scenario". The parser of the block is scenario_spec.cpp; the planner and the checks
// scenario.cpp; the step's executor manager_scenario.cpp.
#include "sweep/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sweep/kinds.hpp"

namespace capsweep::sweep {

using json = nlohmann::json;

// A scenario's profile against the service's limits: its length, its peak rate, its requests.
std::optional<Error> scenario_limits(const ServiceLimits& l, const JobSpec& spec) {
  const ScenarioSettings& sc = *spec.scenario;
  if (sc.max_concurrency > l.max_connections_per_sweep) {
    return invalid("/scenario/max_concurrency",
                   fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  auto profile = scenario_profile(sc);
  if (!profile) return std::nullopt;  // from_sweep not resolved yet: checked again once it is
  if (to_s(profile->duration()) > l.max_total_sweep_s) {
    return invalid("/scenario/profile", fmt::format("the profile lasts {:.0f} s; the service's limit is {} s per job",
                                                    to_s(profile->duration()), l.max_total_sweep_s));
  }
  double peak = 0;
  for (const auto& seg : profile->segments())
    peak = std::max({peak, seg.rate_rps + seg.amplitude_rps, seg.to_rate_rps + seg.amplitude_rps});
  if (peak > l.max_rate_rps) {
    return invalid("/scenario/profile", fmt::format("the profile reaches {:.1f} req/s; the service's limit is {} req/s",
                                                    peak, l.max_rate_rps));
  }
  if (profile->expected_total() > static_cast<double>(l.max_requests_per_step)) {
    return invalid("/scenario/profile",
                   fmt::format("the profile sends about {:.0f} requests; the service's limit is {} per step",
                               profile->expected_total(), l.max_requests_per_step));
  }
  return std::nullopt;
}

KindRules scenario_kind() {
  KindRules k;
  k.name = "scenario";
  k.blocks = {"scenario"};
  k.parse = [](const json& spec, JobSpec& js) -> std::optional<Error> {
    if (js.arrival.process == ArrivalProcess::all_at_once) {
      return invalid("/arrival/process", "a scenario's rate varies in time: all_at_once has no rate");
    }
    return parse_scenario_block(spec, js);
  };
  k.admit = [](const ServiceLimits& l, const JobSpec& js, json&) { return scenario_limits(l, js); };
  k.next_action = next_scenario_action;
  k.progress = [](const JobSpec&, const std::vector<StepOutcome>& steps) {
    return Plan{1, steps.empty() ? "scenario" : "done"};
  };
  // Its one step is its profile: progress reads the profile's length.
  k.step_length = [](const JobSpec&) { return Nanos{0}; };
  k.drain_timeout = [](const JobSpec& js) { return js.scenario->drain_timeout; };
  return k;
}

}  // namespace capsweep::sweep

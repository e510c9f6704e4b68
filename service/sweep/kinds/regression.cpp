// The regression kind: a baseline and a candidate target measured alternately, round by round,
// with quality passes and an optional judge. Its blocks: "regression", "quality", "judge", and
// "baseline" and "candidate" (each with its target) instead of "target". The parser of the
// blocks is regression_spec.cpp; the planner and the verdicts regression.cpp.
#include "sweep/regression.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sweep/kinds.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

// A regression job's runs against the service's limits, and its whole length against the total.
std::optional<Error> check_regression_limits(const ServiceLimits& l, const JobSpec& spec) {
  const RegressionSettings& r = spec.regression;
  if (r.rate_rps > l.max_rate_rps) {
    return invalid("/regression/rate_rps", fmt::format("exceeds the service's limit of {} req/s", l.max_rate_rps));
  }
  const double run_s = to_s(r.warmup + r.duration);
  if (run_s > l.max_step_duration_s) {
    return invalid(
        "/regression/duration_s",
        fmt::format("warm-up + duration exceed the service's limit of {} s per step", l.max_step_duration_s));
  }
  if (expected_requests(r.rate_rps, run_s) > static_cast<double>(l.max_requests_per_step)) {
    return invalid("/regression/duration_s",
                   fmt::format("{} req/s for {} s would send {:.0f} requests a run; the service's limit is {} per step",
                               r.rate_rps, run_s, expected_requests(r.rate_rps, run_s), l.max_requests_per_step));
  }
  if (r.max_concurrency > l.max_connections_per_sweep) {
    return invalid("/regression/max_concurrency",
                   fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  if (spec.quality && spec.quality->concurrency > l.max_connections_per_sweep) {
    return invalid("/quality/concurrency",
                   fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  const int most = std::max(r.rounds, r.max_rounds);
  const double total_s = 2.0 * most * (run_s + to_s(r.cooldown));
  if (total_s > l.max_total_sweep_s) {
    return invalid(r.max_rounds > r.rounds ? "/regression/max_rounds" : "/regression/rounds",
                   fmt::format("{} rounds of two {:.0f}-s runs take {:.0f} s; the service's limit is {} s per job",
                               most, run_s + to_s(r.cooldown), total_s, l.max_total_sweep_s));
  }
  return std::nullopt;
}

}  // namespace

KindRules regression_kind() {
  KindRules k;
  k.name = "regression";
  k.blocks = {"regression", "quality", "judge", "baseline", "candidate"};
  k.two_sides = true;
  k.parse = [](const json& spec, JobSpec& js) -> std::optional<Error> {
    if (js.arrival.process == ArrivalProcess::all_at_once) {
      return invalid("/arrival/process", "a regression job runs at a fixed rate: all_at_once is for check jobs");
    }
    return parse_regression_blocks(spec, js);
  };
  k.admit = [](const ServiceLimits& l, const JobSpec& js, json&) { return check_regression_limits(l, js); };
  k.next_action = next_regression_action;
  k.progress = regression_progress;
  k.step_length = [](const JobSpec& js) { return js.regression.warmup + js.regression.duration; };
  k.drain_timeout = [](const JobSpec& js) { return js.regression.drain_timeout; };
  return k;
}

}  // namespace capsweep::sweep

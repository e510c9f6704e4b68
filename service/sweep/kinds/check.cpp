// The check kind: one step at a fixed rate (or N users, or all at once) judged against the SLO.
// Its block: "check" (required).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/fields.hpp"
#include "sweep/kinds.hpp"
#include "sweep/orchestrator.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

Result<CheckSettings> parse_check(const json& j, ArrivalProcess process) {
  const std::string f = "/check";
  CheckSettings c;
  if (!j.is_object()) return invalid(f, "must be an object");
  // A burst or a replay brings its own times: no rate of the check's.
  const ArrivalRow::Shape shape = arrival_row(process).shape;
  const bool burst = shape == ArrivalRow::Shape::burst, replay = shape == ArrivalRow::Shape::replay;
  const bool closed_loop = j.contains("concurrency");
  if (closed_loop) {
    if (j.contains("rate_rps")) {
      return invalid(f + "/concurrency", "a check runs at a rate (rate_rps) or with N users (concurrency), not both");
    }
    if (burst || replay) {
      return invalid(f + "/concurrency", "a closed loop has no arrival process: leave arrival.process unset");
    }
    if (j.contains("max_concurrency") && j.at("max_concurrency") != 0) {
      return invalid(f + "/max_concurrency", "a closed loop of N users has N in flight: use concurrency alone");
    }
    c.rate_rps = 0;
  } else if (burst) {
    c.rate_rps = std::numeric_limits<double>::infinity();
    if (j.contains("rate_rps"))
      return invalid(f + "/rate_rps", "must be absent with all_at_once arrivals (the rate is infinite)");
  } else if (replay) {
    c.rate_rps = 0;  // the trace's own, scaled by arrival.speed
    if (j.contains("rate_rps"))
      return invalid(f + "/rate_rps",
                     "must be absent with a trace: it replays its own arrivals (arrival.speed scales them)");
  } else if (!j.contains("rate_rps")) {
    return invalid(f + "/rate_rps", "is required: the fixed request rate of the check (or concurrency: N users)");
  }
  fields::Reader r(j, f);
  if (closed_loop)
    r.integer("concurrency", c.concurrency, 1, 100'000);
  else if (!burst && !replay)
    r.positive("rate_rps", c.rate_rps);
  r.seconds("duration_s", c.duration)
      .seconds("warmup_s", c.warmup, true)
      .integer("max_concurrency", c.max_concurrency, 0, 100'000)
      .integer("requests", c.requests, 1, 10'000'000)
      .seconds("drain_timeout_s", c.drain_timeout);
  if (r.error()) return *r.error();
  if (burst && !c.requests) {
    return invalid(f + "/requests", "is required with all_at_once arrivals");
  }
  if (!burst && c.warmup >= c.duration) {
    return invalid(f + "/warmup_s", "must be shorter than duration_s");
  }
  if (auto t = j.find("think_time_ms"); t != j.end()) {
    if (!closed_loop)
      return invalid(f + "/think_time_ms", "a think time belongs to a closed loop (concurrency: N users)");
    auto d = parse_length_dist(*t, f + "/think_time_ms");
    if (!d) return d.error();
    c.think_time_ms = *d;
  }
  return c;
}

// A check's one step against the service's limits.
std::optional<Error> check_check_limits(const ServiceLimits& l, const CheckSettings& k) {
  const auto max_requests = static_cast<double>(l.max_requests_per_step);
  if (std::isfinite(k.rate_rps) && k.rate_rps > l.max_rate_rps) {
    return invalid("/check/rate_rps", fmt::format("exceeds the service's limit of {} req/s", l.max_rate_rps));
  }
  const double step_s = to_s(k.warmup + k.duration);
  if (step_s > l.max_step_duration_s) {
    return invalid("/check/duration_s", fmt::format("warm-up + duration exceed the service's limit of {} s per step",
                                                    l.max_step_duration_s));
  }
  if (k.requests && *k.requests > l.max_requests_per_step) {
    return invalid("/check/requests",
                   fmt::format("exceeds the service's limit of {} requests per step", l.max_requests_per_step));
  }
  if (!k.requests && std::isfinite(k.rate_rps) && expected_requests(k.rate_rps, step_s) > max_requests) {
    return invalid("/check/duration_s",
                   fmt::format("{} req/s for {} s would send {:.0f} requests; the service's limit is {} per step",
                               k.rate_rps, step_s, expected_requests(k.rate_rps, step_s), l.max_requests_per_step));
  }
  if (k.max_concurrency > l.max_connections_per_sweep) {
    return invalid("/check/max_concurrency",
                   fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  if (k.concurrency > l.max_connections_per_sweep) {
    return invalid("/check/concurrency", fmt::format("{} users need {} connections; the service's limit is {}",
                                                     k.concurrency, k.concurrency, l.max_connections_per_sweep));
  }
  return std::nullopt;
}

}  // namespace

KindRules check_kind() {
  KindRules k;
  k.name = "check";
  k.agents = true;
  k.blocks = {"check"};
  k.parse = [](const json& spec, JobSpec& js) -> std::optional<Error> {
    if (!spec.contains("check")) return invalid("/check", "is required for a check job");
    auto c = parse_check(spec.at("check"), js.arrival.process);
    if (!c) return c.error();
    js.check = *c;
    return std::nullopt;
  };
  k.admit = [](const ServiceLimits& l, const JobSpec& js, json&) { return check_check_limits(l, js.check); };
  k.next_action = next_check_action;
  k.progress = [](const JobSpec&, const std::vector<StepOutcome>& steps) {
    return Plan{1, steps.empty() ? "check" : "done"};
  };
  k.step_length = [](const JobSpec& js) { return js.check.warmup + js.check.duration; };
  k.drain_timeout = [](const JobSpec& js) { return js.check.drain_timeout; };
  k.think_time = [](const JobSpec& js) { return js.check.think_time_ms; };
  return k;
}

}  // namespace capsweep::sweep

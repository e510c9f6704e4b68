// The sweep kind: a rate sweep (baseline, probe, ladder, escalation, bisection; its fixed-rate
// steps may end once decided) or a concurrency sweep (one closed-loop step per level). Its
// blocks: "sweep" (defaults when absent) and "step".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/fields.hpp"
#include "sweep/kinds.hpp"
#include "sweep/levels.hpp"
#include "sweep/orchestrator.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

// sweep.levels: 1 to 64 strictly increasing user counts.
Result<std::vector<std::uint32_t>> parse_levels(const json& lv, const std::string& f) {
  if (!lv.is_array() || lv.empty() || lv.size() > 64) return invalid(f, "must list 1 to 64 user counts");
  std::vector<std::uint32_t> levels;
  for (std::size_t i = 0; i < lv.size(); ++i) {
    const json& v = lv[i];
    const std::string fi = f + "/" + std::to_string(i);
    if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 100'000)
      return invalid(fi, "must be a whole number of users in 1..100000");
    const auto users = v.get<std::uint32_t>();
    if (!levels.empty() && users <= levels.back()) return invalid(fi, "levels must be strictly increasing");
    levels.push_back(users);
  }
  return levels;
}

// sweep.search ("ladder" | "scout") and a scouting search's step lengths: by default a quarter
// of the full step's measured part (at most 15 s) after half its warm-up (at most 5 s).
std::optional<Error> parse_search(const json& j, const std::string& f, SweepSettings& s) {
  if (auto m = j.find("search"); m != j.end()) {
    if (*m == "ladder")
      s.search = SweepSearch::ladder;
    else if (*m == "scout")
      s.search = SweepSearch::scout;
    else
      return invalid(f + "/search", "must be \"ladder\" or \"scout\"");
  }
  if (s.search == SweepSearch::scout && s.mode != SweepMode::rate)
    return invalid(f + "/search", "\"scout\" applies to rate sweeps; a concurrency sweep runs its levels");
  s.scout_duration = std::min<Nanos>(std::chrono::seconds(15), s.step_duration / 4);
  s.scout_warmup = std::min<Nanos>(std::chrono::seconds(5), s.warmup / 2);
  fields::Reader r(j, f);
  r.seconds("scout_s", s.scout_duration).seconds("scout_warmup_s", s.scout_warmup, true);
  if (r.error()) return *r.error();
  for (const char* key : {"scout_s", "scout_warmup_s"}) {
    if (j.contains(key) && s.search != SweepSearch::scout)
      return invalid(f + "/" + key, "applies to \"search\": \"scout\" only");
  }
  if (s.scout_duration > s.step_duration) return invalid(f + "/scout_s", "must be at most step_duration_s");
  if (s.scout_warmup > s.warmup) return invalid(f + "/scout_warmup_s", "must be at most warmup_s");
  return std::nullopt;
}

Result<SweepSettings> parse_sweep(const json& j) {
  const std::string f = "/sweep";
  SweepSettings s;
  if (!j.is_object()) return invalid(f, "must be an object");
  fields::Reader r(j, f);
  r.integer("steps", s.steps, 1, 100)
      .seconds("step_duration_s", s.step_duration)
      .seconds("warmup_s", s.warmup, true)
      .integer("stop_after_failures", s.stop_after_failures, 1, 100)
      .positive("tolerance", s.tolerance)
      .integer("max_steps", s.max_steps, 1, 1000)
      .integer("baseline_requests", s.baseline_requests, 1, 100'000)
      .integer("probe_requests", s.probe_requests, 1, 1'000'000)
      .integer("probe_concurrency", s.probe_concurrency, 1, 100'000)
      .integer("max_concurrency", s.max_concurrency, 0, 100'000)
      .positive("escalation_factor", s.escalation_factor)
      .positive("max_rate_rps", s.max_rate_rps)
      .seconds("drain_timeout_s", s.drain_timeout)
      .seconds("max_step_duration_s", s.max_step_duration);
  if (r.error()) return *r.error();
  if (auto m = j.find("mode"); m != j.end()) {
    if (*m == "rate")
      s.mode = SweepMode::rate;
    else if (*m == "concurrency")
      s.mode = SweepMode::concurrency;
    else
      return invalid(f + "/mode", "must be \"rate\" or \"concurrency\"");
  }
  if (auto e = parse_search(j, f, s)) return *e;
  if (auto lv = j.find("levels"); lv != j.end()) {
    if (s.mode != SweepMode::concurrency) return invalid(f + "/levels", "applies to \"mode\": \"concurrency\" only");
    auto levels = parse_levels(*lv, f + "/levels");
    if (!levels) return levels.error();
    s.levels = std::move(*levels);
  }
  if (auto sp = j.find("spacing"); sp != j.end()) {
    if (*sp == "linear")
      s.spacing = Spacing::linear;
    else if (*sp == "geometric")
      s.spacing = Spacing::geometric;
    else
      return invalid(f + "/spacing", "must be \"linear\" or \"geometric\"");
  }
  if (s.tolerance >= 1) return invalid(f + "/tolerance", "must be in (0, 1)");
  if (s.escalation_factor <= 1) return invalid(f + "/escalation_factor", "must be greater than 1");
  if (s.warmup >= s.step_duration) return invalid(f + "/warmup_s", "must be shorter than step_duration_s");
  if (s.max_step_duration < s.warmup + s.step_duration) {
    return invalid(f + "/max_step_duration_s", "must be at least warmup_s + step_duration_s");
  }
  if (auto t = j.find("think_time_ms"); t != j.end()) {
    if (s.mode != SweepMode::concurrency)
      return invalid(f + "/think_time_ms", "applies to \"mode\": \"concurrency\" only");
    auto d = parse_length_dist(*t, f + "/think_time_ms");
    if (!d) return d.error();
    s.think_time_ms = *d;
  }
  return s;
}

// The "step" block: {"stop": "fixed" | "decided", "min_s", "min_requests", "max_s", "looks"}.
Result<StepStopSettings> parse_step(const json& j, const SweepSettings& sweep) {
  const std::string f = "/step";
  StepStopSettings s;
  if (!j.is_object()) return invalid(f, "must be an object");
  if (auto e = fields::known_keys(j, {"stop", "min_s", "min_requests", "max_s", "looks"}, f, "a step's stop"))
    return *e;
  if (auto m = j.find("stop"); m != j.end()) {
    if (*m == "fixed")
      s.stop = StepStop::fixed;
    else if (*m == "decided")
      s.stop = StepStop::decided;
    else
      return invalid(f + "/stop",
                     "must be \"fixed\" (each step runs its length) or \"decided\" (it ends once decided)");
  }
  if (s.stop == StepStop::fixed) {
    for (const char* key : {"min_s", "min_requests", "max_s", "looks"}) {
      if (j.contains(key)) return invalid(f + "/" + key, "applies to \"stop\": \"decided\" only");
    }
    return s;
  }
  if (sweep.mode != SweepMode::rate) {
    return invalid(f + "/stop", "\"decided\" applies to rate sweeps; a concurrency sweep's levels run their length");
  }
  s.decide.min_time = std::min<Nanos>(std::chrono::seconds(10), sweep.step_duration);
  Nanos max{0};
  fields::Reader r(j, f);
  r.seconds("min_s", s.decide.min_time, true)
      .integer("min_requests", s.decide.min_requests, 1, 1'000'000)
      .integer("looks", s.decide.looks, 1, 100)
      .seconds("max_s", max);
  if (r.error()) return *r.error();
  if (j.contains("max_s")) {
    if (max < s.decide.min_time) return invalid(f + "/max_s", "must be at least min_s");
    if (sweep.warmup + max > sweep.max_step_duration) {
      return invalid(f + "/max_s", "warm-up + max_s exceed sweep.max_step_duration_s");
    }
    s.max = max;
  }
  return s;
}

// A sweep's "sweep" block (defaults when absent) and its "step" block.
std::optional<Error> parse_sweep_blocks(const json& spec, JobSpec& js) {
  if (js.arrival.process == ArrivalProcess::all_at_once) {
    return invalid("/arrival/process", "a sweep steps through fixed rates: all_at_once is for check jobs");
  }
  auto s = parse_sweep(spec.value("sweep", json::object()));
  if (!s) return s.error();
  js.sweep = *s;
  if (auto st = spec.find("step"); st != spec.end()) {
    auto step = parse_step(*st, js.sweep);
    if (!step) return step.error();
    js.step = *step;
  }
  return std::nullopt;
}

// The longest a sweep's rate step may run: warm-up + step, or a decided step's longest.
double longest_rate_step_s(const ServiceLimits& l, const JobSpec& spec) {
  const double fixed_s = to_s(spec.sweep.warmup + spec.sweep.step_duration);
  if (spec.step.stop != StepStop::decided) return fixed_s;
  const Nanos longest = spec.sweep.warmup + (spec.step.max ? *spec.step.max : 2 * spec.sweep.step_duration);
  return std::max(fixed_s, std::min(to_s(longest), l.max_step_duration_s));
}

// The highest rate a sweep that leaves max_rate_rps open may escalate to: the service's limit,
// or lower (whole req/s) where a step of `longest_step_s` would send more requests than a step
// may. So a service that allows high rates still takes a sweep of long steps: it stops lower.
double open_rate_ceiling(const ServiceLimits& l, double longest_step_s) {
  const double by_requests = std::floor(static_cast<double>(l.max_requests_per_step) / longest_step_s);
  return std::max(1.0, std::min(l.max_rate_rps, by_requests));
}

// A sweep's steps against the service's limits; fills in the limits the spec leaves open.
std::optional<Error> check_sweep_limits(const ServiceLimits& l, const SweepSettings& s, double longest_step_s,
                                        json& doc) {
  const auto max_requests = static_cast<double>(l.max_requests_per_step);
  const double step_s = to_s(s.warmup + s.step_duration);
  if (step_s > l.max_step_duration_s) {
    return invalid("/sweep/step_duration_s",
                   fmt::format("warm-up + step exceed the service's limit of {} s per step", l.max_step_duration_s));
  }
  if (s.max_rate_rps && *s.max_rate_rps > l.max_rate_rps) {
    return invalid("/sweep/max_rate_rps", fmt::format("exceeds the service's limit of {} req/s", l.max_rate_rps));
  }
  const double top = s.max_rate_rps.value_or(open_rate_ceiling(l, longest_step_s));
  if (expected_requests(top, step_s) > max_requests) {
    return invalid(
        s.max_rate_rps ? "/sweep/max_rate_rps" : "/sweep/step_duration_s",
        fmt::format("a step at {} req/s for {} s would send {:.0f} requests; the service's limit is {} per step", top,
                    step_s, expected_requests(top, step_s), l.max_requests_per_step));
  }
  if (!s.max_rate_rps) doc["sweep"]["max_rate_rps"] = top;  // escalation stops there
  if (to_s(s.max_step_duration) > l.max_step_duration_s) {
    if (doc["sweep"].contains("max_step_duration_s")) {
      return invalid("/sweep/max_step_duration_s",
                     fmt::format("exceeds the service's limit of {} s per step", l.max_step_duration_s));
    }
    doc["sweep"]["max_step_duration_s"] = l.max_step_duration_s;  // steps stretch up to the limit
  }
  if (s.probe_requests > l.max_requests_per_step) {
    return invalid("/sweep/probe_requests",
                   fmt::format("exceeds the service's limit of {} requests per step", l.max_requests_per_step));
  }
  if (s.probe_concurrency > l.max_connections_per_sweep) {
    return invalid("/sweep/probe_concurrency",
                   fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  for (std::size_t i = 0; s.mode == SweepMode::concurrency && i < s.levels.size(); ++i) {
    if (s.levels[i] > l.max_connections_per_sweep) {
      return invalid(fmt::format("/sweep/levels/{}", i),
                     fmt::format("{} users need {} connections; the service's limit is {}", s.levels[i], s.levels[i],
                                 l.max_connections_per_sweep));
    }
  }
  if (s.max_concurrency > l.max_connections_per_sweep) {
    return invalid("/sweep/max_concurrency",
                   fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  return std::nullopt;
}

// A step stopped "decided" may run to step.max_s (by default twice the fixed step, within the
// longest step allowed): its requests at the top rate within the limit per step.
std::optional<Error> check_decided_limits(const ServiceLimits& l, const JobSpec& spec) {
  if (spec.step.stop != StepStop::decided) return std::nullopt;
  const double step_s = longest_rate_step_s(l, spec);
  const double top = spec.sweep.max_rate_rps.value_or(open_rate_ceiling(l, step_s));
  if (expected_requests(top, step_s) > static_cast<double>(l.max_requests_per_step)) {
    return invalid(
        spec.step.max ? "/step/max_s" : "/step/stop",
        fmt::format("a decided step may run {} s at {} req/s: {:.0f} requests; the service's limit is {} per "
                    "step (set step.max_s or sweep.max_rate_rps)",
                    step_s, top, expected_requests(top, step_s), l.max_requests_per_step));
  }
  return std::nullopt;
}

}  // namespace

KindRules sweep_kind() {
  KindRules k;
  k.name = "sweep";
  k.agents = true;
  k.blocks = {"sweep", "step"};
  k.parse = parse_sweep_blocks;
  k.admit = [](const ServiceLimits& l, const JobSpec& js, json& doc) -> std::optional<Error> {
    if (auto e = check_sweep_limits(l, js.sweep, longest_rate_step_s(l, js), doc)) return e;
    return check_decided_limits(l, js);
  };
  k.next_action = [](const JobSpec& js, const std::vector<StepOutcome>& steps) {
    return js.sweep.mode == SweepMode::concurrency ? next_level_action(js, steps) : next_rate_action(js, steps);
  };
  k.progress = [](const JobSpec& js, const std::vector<StepOutcome>& steps) {
    return js.sweep.mode == SweepMode::concurrency ? level_progress(js, steps) : rate_progress(js, steps);
  };
  k.step_length = [](const JobSpec& js) { return js.sweep.warmup + js.sweep.step_duration; };
  k.drain_timeout = [](const JobSpec& js) { return js.sweep.drain_timeout; };
  k.think_time = [](const JobSpec& js) { return js.sweep.think_time_ms; };
  return k;
}

}  // namespace capsweep::sweep

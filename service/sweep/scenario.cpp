#include "sweep/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/json_access.hpp"
#include "core/windows.hpp"
#include "sweep/scenario_checks.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;
using namespace scenario_checks;

// Whether a window meets the job's SLO as far as a window can tell: its TTFT percentiles
// (p50, p95, p99), its ITL p95, its error rate.
bool window_meets_slo(const JobSpec& spec, const WindowRow& r) {
  for (const auto& b : spec.slo.latency) {
    if (!b.percentile) continue;
    std::optional<double> v;
    if (b.metric == LatencyMetric::ttft) {
      v = *b.percentile == 50   ? r.p50_ttft_ms
          : *b.percentile == 95 ? r.p95_ttft_ms
          : *b.percentile == 99 ? r.p99_ttft_ms
                                : std::nullopt;
    } else if (b.metric == LatencyMetric::itl && *b.percentile == 95) {
      v = r.p95_itl_ms;
    }
    if (v && *v > b.bound_ms) return false;
  }
  if (r.scheduled > 0 && spec.slo.max_error_rate &&
      static_cast<double>(failures(r, false)) / static_cast<double>(r.scheduled) > *spec.slo.max_error_rate) {
    return false;
  }
  return r.scheduled == 0 || r.p95_ttft_ms.has_value();
}

// The first window at or after `from_s` that starts a run of `k` windows meeting the SLO.
std::optional<int> recovered_at(const JobSpec& spec, const Facts& f, double from_s, int k) {
  int run = 0;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    if (f.rows[i].t_start_s + f.window_s <= from_s) continue;
    run = window_meets_slo(spec, f.rows[i]) ? run + 1 : 0;
    if (run >= k) return static_cast<int>(i) - k + 1;
  }
  return std::nullopt;
}

json scale_up_reaction(const Facts& f, double max_s) {
  if (!f.spike_s)
    return check("inconclusive", nullptr, max_s, "s", {}, {}, "the profile never goes above the capacity");
  std::optional<double> before;
  std::optional<int> first;
  for (std::size_t i = 0; i < f.raw.size(); ++i) {
    const auto n = replicas_of(f.raw[i]);
    if (!n) continue;
    if (f.rows[i].t_start_s < *f.spike_s) {
      before = n;
      continue;
    }
    if (!before) before = n;  // the first reading after the spike began
    if (*n > *before && !first) first = static_cast<int>(i);
  }
  if (!before) return check("inconclusive", nullptr, max_s, "s", {}, {}, "no replica count was read");
  if (!first) {
    return check("fail", nullptr, max_s, "s", {}, {},
                 fmt::format("the replicas serving never rose above {} after the spike at {} s", *before, *f.spike_s));
  }
  // Counts are read at each window's end: the increase happened by then.
  const double measured = f.rows[static_cast<std::size_t>(*first)].t_start_s + f.window_s - *f.spike_s;
  return check(measured <= max_s ? "pass" : "fail", round3(measured), max_s, "s", first, first,
               fmt::format("{} -> {} replicas serving, seen at the end of window {}", *before,
                           *replicas_of(f.raw[static_cast<std::size_t>(*first)]), *first));
}

json slo_during_scale_up(const JobSpec& spec, const Facts& f, const ScenarioChecks::Slo& bound) {
  if (!f.spike_s)
    return check("inconclusive", nullptr, nullptr, "", {}, {}, "the profile never goes above the capacity");
  const auto rec =
      recovered_at(spec, f, *f.spike_s, spec.scenario->checks.recovery ? spec.scenario->checks.recovery->windows : 3);
  std::vector<const WindowRow*> span;
  std::optional<int> first, last;
  std::uint64_t scheduled = 0, failed = 0, rejected = 0;
  for (std::size_t i = 0; i < f.rows.size(); ++i) {
    const WindowRow& r = f.rows[i];
    if (r.t_start_s + f.window_s <= *f.spike_s) continue;
    // Up to the recovery; at least the spike's first window (a fleet that held the SLO
    // throughout recovered at once).
    if (rec && static_cast<int>(i) >= *rec && first) break;
    if (!first) first = static_cast<int>(i);
    last = static_cast<int>(i);
    span.push_back(&r);
    scheduled += r.scheduled;
    failed += failures(r, false);
    rejected += r.rejected;
  }
  if (span.empty() || scheduled == 0)
    return check("inconclusive", nullptr, nullptr, "", first, last, "no request in the scale-up");
  const double error_rate = static_cast<double>(failed) / static_cast<double>(scheduled);
  const auto p95 = pooled_ttft_percentile(span, 95);
  const bool ok = error_rate <= bound.max_error_rate && p95 && *p95 <= bound.ttft_p95_ms;
  json measured{{"error_rate", round3(error_rate)},
                {"ttft_p95_ms", p95 ? round3(*p95) : json(nullptr)},
                {"rejected_rate", round3(static_cast<double>(rejected) / static_cast<double>(scheduled))}};
  return check(ok ? "pass" : "fail", std::move(measured),
               {{"max_error_rate", bound.max_error_rate}, {"ttft_p95_ms", bound.ttft_p95_ms}}, "", first, last,
               fmt::format("{} requests from the spike to {}; fast rejections (429/503 at once) counted apart",
                           scheduled, rec ? fmt::format("recovery (window {})", *rec) : std::string("the end")));
}

json recovery(const JobSpec& spec, const Facts& f, const ScenarioChecks::Recovery& r) {
  if (!f.spike_s)
    return check("inconclusive", nullptr, r.max_s, "s", {}, {}, "the profile never goes above the capacity");
  const auto at = recovered_at(spec, f, *f.spike_s, r.windows);
  if (!at) {
    return check("fail", nullptr, r.max_s, "s", {}, {},
                 fmt::format("no {} windows in a row met the SLO after the spike at {} s", r.windows, *f.spike_s));
  }
  const double measured = std::max(0.0, f.rows[static_cast<std::size_t>(*at)].t_start_s - *f.spike_s);
  return check(measured <= r.max_s ? "pass" : "fail", round3(measured), r.max_s, "s", at, *at + r.windows - 1,
               fmt::format("windows {}..{} met the SLO", *at, *at + r.windows - 1));
}

json scale_down(const Facts& f, std::uint64_t max_cut) {
  std::optional<int> first, last;
  for (std::size_t i = 1; i < f.raw.size(); ++i) {
    const auto now = replicas_of(f.raw[i], "ready"), before = replicas_of(f.raw[i - 1], "ready");
    if (now && before && *now < *before) {
      if (!first) first = static_cast<int>(i);
      last = static_cast<int>(i);
    }
  }
  if (!first) return check("inconclusive", nullptr, max_cut, "streams", {}, {}, "the ready replicas never decreased");
  // A stream cut while a replica left was scheduled a little earlier: two windows of margin
  // before, one after.
  const int from = std::max(0, *first - 2), to = std::min(static_cast<int>(f.rows.size()) - 1, *last + 1);
  std::uint64_t cut = 0;
  for (int i = from; i <= to; ++i) cut += f.rows[static_cast<std::size_t>(i)].cut;
  return check(
      cut <= max_cut ? "pass" : "fail", cut, max_cut, "streams", from, to,
      fmt::format("streams cut (reset mid-stream, incomplete) in windows {}..{} around the decrease", from, to));
}

json flapping(const JobSpec& spec, const Profile& profile, const Facts& f, int max_changes) {
  // The windows inside oscillating segments.
  std::vector<std::pair<double, double>> spans;
  for (std::size_t i = 0; i < profile.segments().size(); ++i) {
    if (profile.segments()[i].amplitude_rps > 0) {
      spans.emplace_back(to_s(profile.start_of(i)), to_s(profile.start_of(i) + profile.segments()[i].duration));
    }
  }
  (void)spec;
  if (spans.empty()) return check("inconclusive", nullptr, max_changes, "changes", {}, {}, "no segment oscillates");
  const bool use_desired =
      std::any_of(f.raw.begin(), f.raw.end(), [](const json& w) { return number_at(w, "desired").has_value(); });
  const char* which = use_desired ? "desired" : "ready";
  int changes = 0, direction = 0;
  std::optional<double> prev;
  std::optional<int> first, last;
  for (std::size_t i = 0; i < f.raw.size(); ++i) {
    const double t = f.rows[i].t_start_s;
    if (std::none_of(spans.begin(), spans.end(), [t](const auto& s) { return t >= s.first && t < s.second; })) continue;
    const auto n = replicas_of(f.raw[i], which);
    if (!n) continue;
    if (!first) first = static_cast<int>(i);
    last = static_cast<int>(i);
    if (prev && *n != *prev) {
      const int d = *n > *prev ? 1 : -1;
      if (direction != 0 && d != direction) ++changes;
      direction = d;
    }
    prev = n;
  }
  if (!first) return check("inconclusive", nullptr, max_changes, "changes", {}, {}, "no replica count was read");
  return check(changes <= max_changes ? "pass" : "fail", changes, max_changes, "changes", first, last,
               fmt::format("direction changes of the {} replicas while the load oscillated", which));
}

double correlation(const std::vector<double>& x, const std::vector<double>& y) {
  const std::size_t n = x.size();
  if (n < 3) return std::nan("");
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / double(n);
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / double(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : std::nan("");
}

json metric_choice(const Facts& f) {
  std::map<std::string, std::vector<std::size_t>> seen;  // gauge -> windows that have it
  for (std::size_t i = 0; i < f.raw.size(); ++i) {
    const json& server = json_at(f.raw[i], "server");
    if (!server.is_object()) continue;
    for (const auto& [name, v] : server.items())
      if (v.is_number()) seen[name].push_back(i);
  }
  json gauges = json::array();
  for (const auto& [name, idx] : seen) {
    std::vector<double> g, inflight, gt, ttft;
    for (std::size_t i : idx) {
      const double v = f.raw[i]["server"][name].get<double>();
      g.push_back(v);
      inflight.push_back(static_cast<double>(f.rows[i].in_flight));
      if (f.rows[i].p95_ttft_ms) {
        gt.push_back(v);
        ttft.push_back(*f.rows[i].p95_ttft_ms);
      }
    }
    const double ci = correlation(g, inflight), ct = correlation(gt, ttft);
    gauges.push_back({{"name", name},
                      {"corr_in_flight", round3(ci)},
                      {"corr_ttft_p95", round3(ct)},
                      {"tracks_user_impact", std::isfinite(ci) && std::isfinite(ct) && ci >= 0.6 && ct >= 0.4}});
  }
  // Ranked by how well they follow the users' side: the weaker of the two correlations.
  std::sort(gauges.begin(), gauges.end(), [](const json& a, const json& b) {
    auto score = [](const json& g) {
      const double ci = g["corr_in_flight"].is_number() ? g["corr_in_flight"].get<double>() : -2;
      const double ct = g["corr_ttft_p95"].is_number() ? g["corr_ttft_p95"].get<double>() : -2;
      return std::min(ci, ct);
    };
    return score(a) > score(b);
  });
  if (gauges.empty()) return check("inconclusive", nullptr, nullptr, "", {}, {}, "no gauge of the target was read");
  json ranking = json::array();
  for (const auto& g : gauges) ranking.push_back(g["name"]);
  return {{"verdict", "advisory"},
          {"measured", {{"gauges", gauges}, {"ranking", ranking}}},
          {"bound", nullptr},
          {"unit", "correlation"},
          {"windows", json::array({0, static_cast<int>(f.rows.size()) - 1})},
          {"detail",
           "each gauge against the requests in flight and the TTFT p95, window by window; a scaling metric "
           "should track both"}};
}

int severity(const std::string& v) {
  return v == "fail" ? 2 : v == "inconclusive" ? 1 : 0;
}

}  // namespace

std::optional<double> spike_start_s(const JobSpec& spec, const Profile& profile) {
  if (!spec.scenario || !spec.scenario->capacity_rps) return std::nullopt;
  const double cap = *spec.scenario->capacity_rps;
  for (std::size_t i = 0; i < profile.segments().size(); ++i) {
    const ProfileSegment& s = profile.segments()[i];
    if (s.rate_rps > cap * (1 + 1e-9)) return to_s(profile.start_of(i));
    if (s.to_rate_rps > cap * (1 + 1e-9)) {
      // A ramp crosses the capacity inside the segment.
      const double frac = (cap - s.rate_rps) / (s.to_rate_rps - s.rate_rps);
      return to_s(profile.start_of(i)) + frac * to_s(s.duration);
    }
  }
  return std::nullopt;
}

Action next_scenario_action(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  for (const auto& s : steps) {
    if (s.kind != StepKind::scenario) continue;
    const json& result = json_at(s.summary, "result");
    if (result.is_object()) return Finish{result};
    return Fail{"the scenario's stored step has no result"};
  }
  auto profile = scenario_profile(*spec.scenario);
  if (!profile) return Fail{"the scenario's profile: " + profile.error().message};
  StepOrder o;
  o.kind = StepKind::scenario;
  o.phase = "scenario";
  o.duration = profile->duration();
  o.rate_rps = profile->expected_total() / std::max(to_s(profile->duration()), 1e-9);
  o.concurrency = spec.scenario->max_concurrency;
  return o;
}

namespace {

// What the scenario's windows hold in all: requests scheduled, completed, failed, rejected,
// and the TTFT p95 of every window pooled.
json scenario_summary(const Facts& f) {
  std::uint64_t scheduled = 0, completed = 0, failed = 0, rejected = 0;
  std::vector<const WindowRow*> all;
  for (const auto& r : f.rows) {
    scheduled += r.scheduled;
    completed += r.completed;
    failed += failures(r, true);
    rejected += r.rejected;
    all.push_back(&r);
  }
  const auto p95 = pooled_ttft_percentile(all, 95);
  return {{"scheduled", scheduled},
          {"completed", completed},
          {"failed", failed},
          {"rejected", rejected},
          {"pooled_p95_ttft_ms", p95 ? round3(*p95) : json(nullptr)}};
}

// The conditions a scenario ran under: its capacity, profile, spike, windows and target.
json scenario_conditions(const JobSpec& spec, const Profile& profile, const Facts& f) {
  const ScenarioSettings& sc = *spec.scenario;
  json segments = json::array();
  for (const auto& s : profile.segments()) {
    segments.push_back({{"duration_s", to_s(s.duration)},
                        {"rate_rps", round3(s.rate_rps)},
                        {"to_rate_rps", round3(s.to_rate_rps)},
                        {"amplitude_rps", round3(s.amplitude_rps)}});
  }
  return {{"capacity_rps", sc.capacity_rps ? json(*sc.capacity_rps) : json(nullptr)},
          {"from_sweep", sc.from_sweep.empty() ? json(nullptr) : json(sc.from_sweep)},
          {"profile", std::move(segments)},
          {"spike_start_s", f.spike_s ? json(*f.spike_s) : json(nullptr)},
          {"window_s", f.window_s},
          {"duration_s", to_s(profile.duration())},
          {"arrival", to_string(spec.arrival.process)},
          {"target", spec.base_url}};
}

}  // namespace

json scenario_result(const JobSpec& spec, const Profile& profile, const std::vector<json>& windows, const json& events,
                     const EarliestRequests& requests, bool generator_limited) {
  const ScenarioSettings& sc = *spec.scenario;
  Facts f;
  f.window_s = to_s(sc.window);
  f.raw = windows;
  for (const auto& w : windows) f.rows.push_back(window_from_json(w));
  f.spike_s = spike_start_s(spec, profile);
  const ScenarioChecks& c = sc.checks;
  json checks = json::object();
  if (c.scale_up_reaction_max_s) checks["scale_up_reaction_s"] = scale_up_reaction(f, *c.scale_up_reaction_max_s);
  if (c.slo_during_scale_up) checks["slo_during_scale_up"] = slo_during_scale_up(spec, f, *c.slo_during_scale_up);
  if (c.recovery) checks["recovery_s"] = recovery(spec, f, *c.recovery);
  if (c.cold_start) checks["cold_start"] = cold_start(events, *c.cold_start);
  if (c.readiness) checks["readiness"] = readiness(f, events, requests, *c.readiness);
  if (c.scale_down_max_cut_streams) checks["scale_down"] = scale_down(f, *c.scale_down_max_cut_streams);
  if (c.flapping_max_direction_changes)
    checks["flapping"] = flapping(spec, profile, f, *c.flapping_max_direction_changes);
  if (c.metric_choice) checks["metric_choice"] = metric_choice(f);
  std::string verdict = "pass";
  for (const auto& [name, v] : checks.items()) {
    const std::string cv = v.value("verdict", "inconclusive");
    if (cv != "advisory" && severity(cv) > severity(verdict)) verdict = cv;
  }
  const bool judged = !checks.empty();
  json r;
  r["kind"] = "scenario";
  r["verdict"] = judged ? verdict : "inconclusive";
  r["checks"] = std::move(checks);
  r["events"] = events;
  r["windows"] = windows.size();
  r["summary"] = scenario_summary(f);
  r["conditions"] = scenario_conditions(spec, profile, f);
  r["warnings"] = judged ? json::array() : json::array({"no check was named in scenario.checks: nothing was judged"});
  if (generator_limited) {
    // The load was not the profile's: the windows' latencies include the generator's delay.
    r["warnings"].push_back(
        "the load generator fell behind its schedule (generator_limited): the windows' rates and latencies are not "
        "the profile's; use a faster machine or a lower rate");
    if (r["verdict"] == "pass") r["verdict"] = "inconclusive";
  }
  r["basis"] = spec.basis;
  return r;
}

}  // namespace capsweep::sweep

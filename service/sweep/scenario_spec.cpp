// The scenario block of a scenario job: the profile (rates or multiples of the capacity), the
// windows, where readiness and replica counts are read, and the checks judged.

#include <fmt/format.h>

#include <map>
#include <string_view>
#include <vector>

#include "core/fields.hpp"
#include "core/text.hpp"
#include "llm/target.hpp"
#include "sweep/spec.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

Result<ScenarioSegment> parse_segment(const json& j, const std::string& f) {
  ScenarioSegment seg;
  if (!j.is_object()) return invalid(f, "must be an object {\"duration_s\", \"rate_rps\" or \"capacity_x\", ...}");
  for (const auto& item : j.items()) {
    const std::string& k = item.key();
    static const std::array<const char*, 6> known{"duration_s",  "rate_rps",      "capacity_x",
                                                  "to_rate_rps", "to_capacity_x", "oscillate"};
    if (std::find_if(known.begin(), known.end(), [&](const char* n) { return k == n; }) == known.end()) {
      return invalid(f + "/" + printable_ascii(k, 64), "unknown field of a profile segment");
    }
  }
  auto d = fields::seconds(j, "duration_s", f, Nanos{0});
  if (!d) return d.error();
  if (d->count() <= 0) return invalid(f + "/duration_s", "is required: the segment's length in seconds");
  seg.duration = *d;
  auto read = [&](const char* key, std::optional<double>& out) -> std::optional<Error> {
    if (!j.contains(key)) return std::nullopt;
    auto v = fields::number_in(j, key, f, std::nullopt, 0, 1e6);
    if (!v) return v.error();
    out = *v;
    return std::nullopt;
  };
  for (auto [key, out] : {std::pair{"rate_rps", &seg.rate_rps}, std::pair{"capacity_x", &seg.capacity_x},
                          std::pair{"to_rate_rps", &seg.to_rate_rps}, std::pair{"to_capacity_x", &seg.to_capacity_x}}) {
    if (auto e = read(key, *out)) return *e;
  }
  if (seg.rate_rps.has_value() == seg.capacity_x.has_value()) {
    return invalid(f + "/rate_rps", "give the segment's rate_rps or its capacity_x, one of them (0 is idle)");
  }
  if (seg.to_rate_rps && seg.to_capacity_x) return invalid(f + "/to_rate_rps", "give to_rate_rps or to_capacity_x");
  if (auto o = j.find("oscillate"); o != j.end()) {
    const std::string fo = f + "/oscillate";
    if (!o->is_object()) return invalid(fo, "must be {\"amplitude_x\" or \"amplitude_rps\", \"period_s\"}");
    if (o->contains("amplitude_rps") == o->contains("amplitude_x")) {
      return invalid(fo + "/amplitude_rps", "give amplitude_rps or amplitude_x, one of them");
    }
    for (auto [key, out] :
         {std::pair{"amplitude_rps", &seg.amplitude_rps}, std::pair{"amplitude_x", &seg.amplitude_x}}) {
      if (!o->contains(key)) continue;
      auto v = fields::number_in(*o, key, fo, std::nullopt, 0, 1e6);
      if (!v) return v.error();
      *out = *v;
    }
    auto p = fields::seconds(*o, "period_s", fo, Nanos{0});
    if (!p) return p.error();
    if (p->count() <= 0) return invalid(fo + "/period_s", "is required: the oscillation's period in seconds");
    seg.period = *p;
  }
  return seg;
}

std::optional<Error> parse_replicas(const json& j, ScenarioSettings& s) {
  const std::string f = "/scenario/replicas";
  if (!j.is_object()) return invalid(f, "must be {\"prometheus\": {...}} or {\"metric\": {...}}");
  if (auto e = fields::known_keys(j, {"prometheus", "metric"}, f)) return e;
  if (j.contains("prometheus") == j.contains("metric")) {
    return invalid(f, "read the replica counts from a Prometheus server or from the target's metrics, one of them");
  }
  ReplicaSource src;
  static const std::array<const char*, 3> kinds{"ready", "desired", "serving"};
  if (auto p = j.find("prometheus"); p != j.end()) {
    const std::string fp = f + "/prometheus";
    if (!p->is_object() || !p->value("url", json()).is_string()) return invalid(fp + "/url", "is required");
    auto url = llm::parse_base_url({}, p->at("url").get<std::string>(), fp + "/url");
    if (!url) return url.error();
    observe::PromSource ps;
    ps.url = p->at("url").get<std::string>();
    for (const auto& item : p->items()) {
      if (item.key() == "url") continue;
      if (std::find_if(kinds.begin(), kinds.end(), [&](const char* n) { return item.key() == n; }) == kinds.end()) {
        return invalid(fp + "/" + printable_ascii(item.key(), 64), "unknown query (expected ready, desired, serving)");
      }
      if (!item.value().is_string() || item.value().get_ref<const std::string&>().empty() ||
          item.value().get_ref<const std::string&>().size() > 4000) {
        return invalid(fp + "/" + item.key(), "must be a PromQL expression");
      }
      ps.queries[item.key()] = item.value().get<std::string>();
    }
    if (!ps.queries.count("ready")) return invalid(fp + "/ready", "is required: the ready replicas' query");
    src.prometheus = std::move(ps);
  } else {
    const json& m = j.at("metric");
    const std::string fm = f + "/metric";
    if (!m.is_object()) return invalid(fm, "must map ready, desired, serving to gauge names");
    for (const auto& item : m.items()) {
      if (std::find_if(kinds.begin(), kinds.end(), [&](const char* n) { return item.key() == n; }) == kinds.end()) {
        return invalid(fm + "/" + printable_ascii(item.key(), 64), "unknown gauge (expected ready, desired, serving)");
      }
      if (!item.value().is_string() || item.value().get_ref<const std::string&>().empty() ||
          item.value().get_ref<const std::string&>().size() > 200) {
        return invalid(fm + "/" + item.key(), "must be a metric name");
      }
      src.metric[item.key()] = item.value().get<std::string>();
    }
    if (!src.metric.count("ready")) return invalid(fm + "/ready", "is required: the ready replicas' gauge");
  }
  s.replicas = std::move(src);
  return std::nullopt;
}

// One check's bounds into `c`: each check takes its own bounds and nothing else.
std::optional<Error> parse_one_check(const std::string& name, const json& v, const std::string& fc, ScenarioChecks& c) {
  auto number = [&](const char* key, std::optional<double> fallback, double lo, double hi) {
    return fields::number_in(v, key, fc, fallback, lo, hi);
  };
  if (name == "scale_up_reaction_s") {
    auto m = number("max", std::nullopt, 0, 86400);
    if (!m) return m.error();
    c.scale_up_reaction_max_s = *m;
  } else if (name == "slo_during_scale_up") {
    ScenarioChecks::Slo slo;
    auto e = number("max_error_rate", slo.max_error_rate, 0, 1);
    if (!e) return e.error();
    auto t = number("ttft_p95_ms", slo.ttft_p95_ms, 0, 3.6e6);
    if (!t) return t.error();
    c.slo_during_scale_up = ScenarioChecks::Slo{*e, *t};
  } else if (name == "recovery_s") {
    auto m = number("max", 600, 0, 86400);
    if (!m) return m.error();
    auto w = fields::integer<int>(v, "windows", fc, 3, 1, 100);
    if (!w) return w.error();
    c.recovery = ScenarioChecks::Recovery{*m, *w};
  } else if (name == "cold_start") {
    auto e = number("expected_s", std::nullopt, 0, 86400);
    if (!e) return e.error();
    auto t = number("tolerance_pct", 20, 0, 1000);
    if (!t) return t.error();
    c.cold_start = ScenarioChecks::ColdStart{*e, *t};
  } else if (name == "readiness") {
    ScenarioChecks::Readiness r;
    auto w = number("window_s", r.window_s, 0.1, 3600);
    if (!w) return w.error();
    r.window_s = *w;
    if (v.contains("max_ttft_ms")) {
      auto t = number("max_ttft_ms", std::nullopt, 0, 3.6e6);
      if (!t) return t.error();
      r.max_ttft_ms = *t;
    }
    c.readiness = r;
  } else if (name == "scale_down") {
    auto m = fields::integer<std::uint64_t>(v, "max_cut_streams", fc, 0, 0, 1'000'000);
    if (!m) return m.error();
    c.scale_down_max_cut_streams = *m;
  } else if (name == "flapping") {
    auto m = fields::integer<int>(v, "max_direction_changes", fc, 2, 0, 10'000);
    if (!m) return m.error();
    c.flapping_max_direction_changes = *m;
  } else {
    c.metric_choice = true;  // the only other name kBounds knows
  }
  return std::nullopt;
}

// Each check needs what it observes: replica counts, or a readiness URL.
std::optional<Error> check_observables(const ScenarioSettings& s, const std::string& f) {
  const ScenarioChecks& c = s.checks;
  const bool replicas = s.replicas.has_value();
  if ((c.scale_up_reaction_max_s || c.flapping_max_direction_changes || c.scale_down_max_cut_streams) && !replicas) {
    const char* which = c.scale_up_reaction_max_s          ? "scale_up_reaction_s"
                        : c.flapping_max_direction_changes ? "flapping"
                                                           : "scale_down";
    return invalid(f + "/" + which, "needs scenario.replicas (where the replica counts are read)");
  }
  if (c.readiness && !replicas && s.readiness_url.empty()) {
    return invalid(f + "/readiness", "needs scenario.readiness_url or scenario.replicas");
  }
  return std::nullopt;
}

std::optional<Error> parse_checks(const json& j, ScenarioSettings& s) {
  const std::string f = "/scenario/checks";
  if (!j.is_object()) return invalid(f, "must be an object of the checks to judge");
  // Each check's bounds, and nothing else: a misspelt bound is refused, not ignored.
  static const std::map<std::string, std::vector<std::string_view>, std::less<>> kBounds{
      {"scale_up_reaction_s", {"max"}},           {"slo_during_scale_up", {"max_error_rate", "ttft_p95_ms"}},
      {"recovery_s", {"max", "windows"}},         {"cold_start", {"expected_s", "tolerance_pct"}},
      {"readiness", {"window_s", "max_ttft_ms"}}, {"scale_down", {"max_cut_streams"}},
      {"flapping", {"max_direction_changes"}},    {"metric_choice", {}}};
  for (const auto& item : j.items()) {
    const std::string& name = item.key();
    const json& v = item.value();
    const std::string fc = f + "/" + printable_ascii(name, 64);
    if (!v.is_object()) return invalid(fc, "must be an object of the check's bounds");
    const auto b = kBounds.find(name);
    if (b == kBounds.end()) {
      return invalid(fc,
                     "unknown check (scale_up_reaction_s, slo_during_scale_up, recovery_s, cold_start, readiness, "
                     "scale_down, flapping, metric_choice)");
    }
    if (auto e = fields::known_keys(v, b->second, fc)) return e;
    if (auto e = parse_one_check(name, v, fc, s.checks)) return e;
  }
  return check_observables(s, f);
}

// scenario.profile: 1 to 1000 segments.
Result<std::vector<ScenarioSegment>> parse_segments(const json& profile, const std::string& f) {
  if (!profile.is_array() || profile.empty() || profile.size() > 1000)
    return invalid(f, "must list 1 to 1000 segments");
  std::vector<ScenarioSegment> out;
  for (std::size_t i = 0; i < profile.size(); ++i) {
    auto seg = parse_segment(profile[i], fmt::format("{}/{}", f, i));
    if (!seg) return seg.error();
    out.push_back(*seg);
  }
  return out;
}

}  // namespace

Result<Profile> scenario_profile(const ScenarioSettings& s) {
  std::vector<ProfileSegment> out;
  for (std::size_t i = 0; i < s.segments.size(); ++i) {
    const ScenarioSegment& g = s.segments[i];
    const std::string f = fmt::format("/scenario/profile/{}", i);
    auto rate = [&](const std::optional<double>& rps, const std::optional<double>& x,
                    const char* x_key) -> Result<double> {
      if (rps) return *rps;
      if (!s.capacity_rps) {
        return invalid(f + "/" + x_key, "a multiple of the capacity needs scenario.capacity_rps or from_sweep");
      }
      return *x * *s.capacity_rps;
    };
    auto from = rate(g.rate_rps, g.capacity_x, "capacity_x");
    if (!from) return from.error();
    double to = *from;
    if (g.to_rate_rps || g.to_capacity_x) {
      auto t = rate(g.to_rate_rps, g.to_capacity_x, "to_capacity_x");
      if (!t) return t.error();
      to = *t;
    }
    double amplitude = 0;
    if (g.amplitude_rps || g.amplitude_x) {
      auto a = rate(g.amplitude_rps, g.amplitude_x, "oscillate/amplitude_x");
      if (!a) return a.error();
      amplitude = *a;
    }
    out.push_back({g.duration, *from, to, amplitude, g.period});
  }
  auto p = Profile::make(std::move(out));
  if (!p) {
    Error e = p.error();
    if (e.field.rfind("/profile", 0) == 0) e.field = "/scenario" + e.field;
    return e;
  }
  return p;
}

std::optional<Error> parse_scenario_block(const json& spec, JobSpec& js) {
  const std::string f = "/scenario";
  auto it = spec.find("scenario");
  if (it == spec.end() || !it->is_object()) return invalid(f, "is required for a scenario job");
  const json& j = *it;
  ScenarioSettings s;
  // capacity_rps and from_sweep both appear in a stored spec: the service writes from_sweep's
  // rate into capacity_rps.
  if (j.contains("capacity_rps")) {
    auto c = fields::number(j, "capacity_rps", f, std::nullopt, fields::Sign::positive);
    if (!c) return c.error();
    s.capacity_rps = *c;
  }
  if (auto fs = j.find("from_sweep"); fs != j.end()) {
    if (!fs->is_string() || fs->get_ref<const std::string&>().rfind("sw-", 0) != 0 ||
        fs->get_ref<const std::string&>().size() > 64) {
      return invalid(f + "/from_sweep", "must be the id of a succeeded sweep (\"sw-...\")");
    }
    s.from_sweep = fs->get<std::string>();
  }
  auto segments = parse_segments(j.value("profile", json()), f + "/profile");
  if (!segments) return segments.error();
  s.segments = std::move(*segments);
  fields::Reader r(j, f);
  r.seconds("window_s", s.window)
      .seconds("drain_timeout_s", s.drain_timeout)
      .integer("max_concurrency", s.max_concurrency, 0, 100'000);
  if (r.error()) return *r.error();
  if (s.window < std::chrono::seconds(1) || s.window > std::chrono::seconds(3600)) {
    return invalid(f + "/window_s", "must be in [1, 3600] seconds");
  }
  if (auto u = j.find("readiness_url"); u != j.end()) {
    if (!u->is_string()) return invalid(f + "/readiness_url", "must be a URL");
    auto parsed = llm::parse_base_url({}, u->get<std::string>(), f + "/readiness_url");
    if (!parsed) return parsed.error();
    s.readiness_url = u->get<std::string>();
  }
  if (auto rep = j.find("replicas"); rep != j.end()) {
    if (auto e = parse_replicas(*rep, s)) return *e;
    if (!s.replicas->metric.empty() && js.metrics_url.empty()) {
      return invalid(f + "/replicas/metric", "reads the target's metrics text: give target.metrics_url");
    }
  }
  if (auto c = j.find("checks"); c != j.end()) {
    if (auto e = parse_checks(*c, s)) return *e;
  }
  // With a capacity known (given, or filled in from from_sweep), the profile must be valid now.
  if (s.capacity_rps || s.from_sweep.empty()) {
    auto p = scenario_profile(s);
    if (!p) return p.error();
  }
  js.scenario = std::move(s);
  return std::nullopt;
}

}  // namespace capsweep::sweep

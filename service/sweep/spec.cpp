#include "sweep/spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>

#include "core/fields.hpp"
#include "core/text.hpp"

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

Result<CheckSettings> parse_check(const json& j, ArrivalProcess process) {
  const std::string f = "/check";
  CheckSettings c;
  if (!j.is_object()) return invalid(f, "must be an object");
  const bool closed_loop = j.contains("concurrency");
  if (closed_loop) {
    if (j.contains("rate_rps")) {
      return invalid(f + "/concurrency", "a check runs at a rate (rate_rps) or with N users (concurrency), not both");
    }
    if (process == ArrivalProcess::all_at_once) {
      return invalid(f + "/concurrency", "a closed loop has no arrival process: leave arrival.process unset");
    }
    if (j.contains("max_concurrency") && j.at("max_concurrency") != 0) {
      return invalid(f + "/max_concurrency", "a closed loop of N users has N in flight: use concurrency alone");
    }
    c.rate_rps = 0;
  } else if (process == ArrivalProcess::all_at_once) {
    c.rate_rps = std::numeric_limits<double>::infinity();
    if (j.contains("rate_rps"))
      return invalid(f + "/rate_rps", "must be absent with all_at_once arrivals (the rate is infinite)");
  } else if (!j.contains("rate_rps")) {
    return invalid(f + "/rate_rps", "is required: the fixed request rate of the check (or concurrency: N users)");
  }
  fields::Reader r(j, f);
  if (closed_loop)
    r.integer("concurrency", c.concurrency, 1, 100'000);
  else if (process != ArrivalProcess::all_at_once)
    r.positive("rate_rps", c.rate_rps);
  r.seconds("duration_s", c.duration)
      .seconds("warmup_s", c.warmup, true)
      .integer("max_concurrency", c.max_concurrency, 0, 100'000)
      .integer("requests", c.requests, 1, 10'000'000)
      .seconds("drain_timeout_s", c.drain_timeout);
  if (r.error()) return *r.error();
  if (process == ArrivalProcess::all_at_once && !c.requests) {
    return invalid(f + "/requests", "is required with all_at_once arrivals");
  }
  if (process != ArrivalProcess::all_at_once && c.warmup >= c.duration) {
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

// target.labels: names of 1 to 63 characters ([A-Za-z_] then [A-Za-z0-9_.-]), string values.
std::optional<Error> check_labels(const json& labels, const std::string& field) {
  if (!labels.is_object()) return invalid(field, "must be an object of strings");
  for (const auto& [k, v] : labels.items()) {
    const bool name_ok = !k.empty() && k.size() <= 63 &&
                         (std::isalpha(static_cast<unsigned char>(k[0])) || k[0] == '_') &&
                         std::all_of(k.begin(), k.end(), [](char c) {
                           return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
                         });
    if (!name_ok) {
      return invalid(field + "/" + printable_ascii(k, 64),
                     "a label name is a letter or '_' then letters, digits, '_', '.' or '-' (at most 63)");
    }
    if (!v.is_string()) return invalid(field + "/" + k, "must be a string");
  }
  return std::nullopt;
}

// A target object at `field` (base_url is the queue key), with its optional metrics_url or
// Prometheus source and labels.
std::optional<Error> parse_target_at(const json& t, const std::string& field, CandidateTarget& out) {
  auto parsed_target = llm::parse_target(t, field);
  if (!parsed_target) return parsed_target.error();
  out.target = std::move(*parsed_target);
  out.base_url = t.at("base_url").get<std::string>();
  if (auto m = t.find("metrics_url"); m != t.end()) {
    if (!m->is_string()) return invalid(field + "/metrics_url", "must be a URL");
    auto parsed = llm::parse_base_url({}, m->get<std::string>(), field + "/metrics_url");
    if (!parsed) return parsed.error();
    out.metrics_url = m->get<std::string>();
  }
  if (auto l = t.find("labels"); l != t.end()) {
    if (auto e = check_labels(*l, field + "/labels")) return *e;
  }
  if (auto p = t.find("prometheus"); p != t.end()) {
    if (!out.metrics_url.empty()) {
      return invalid(field + "/prometheus", "read the gauges from metrics_url or from a Prometheus server, not both");
    }
    auto source = observe::parse_prom_source(*p, field + "/prometheus");
    if (!source) return source.error();
    auto parsed = llm::parse_base_url({}, source->url, field + "/prometheus/url");
    if (!parsed) return parsed.error();
    out.prometheus = std::move(*source);
  }
  return std::nullopt;
}

// The job's target: "target", or a regression job's "baseline" and "candidate" targets.
std::optional<Error> parse_target_block(const json& spec, JobSpec& js) {
  CandidateTarget main;
  if (js.kind == JobKind::regression) {
    if (spec.contains("target")) {
      return invalid("/target", "a regression job names baseline.target and candidate.target instead");
    }
    for (const char* side : {"baseline", "candidate"}) {
      auto b = spec.find(side);
      if (b == spec.end()) return invalid(std::string("/") + side, "is required for a regression job");
      if (!b->is_object() || !b->contains("target")) {
        return invalid(std::string("/") + side + "/target", "is required: the target this side runs against");
      }
    }
    if (auto e = parse_target_at(spec.at("baseline").at("target"), "/baseline/target", main)) return *e;
    CandidateTarget candidate;
    if (auto e = parse_target_at(spec.at("candidate").at("target"), "/candidate/target", candidate)) return *e;
    js.candidate = std::move(candidate);
  } else {
    for (const char* side : {"baseline", "candidate"}) {
      if (spec.contains(side)) return invalid(std::string("/") + side, "belongs to a regression job");
    }
    if (!spec.contains("target")) return invalid("/target", "is required");
    if (auto e = parse_target_at(spec.at("target"), "/target", main)) return *e;
  }
  js.target = std::move(main.target);
  js.base_url = std::move(main.base_url);
  js.metrics_url = std::move(main.metrics_url);
  js.prometheus = std::move(main.prometheus);
  return std::nullopt;
}

// report.percentiles: numbers in (0, 100), distinct; kept sorted.
std::optional<Error> parse_report_block(const json& spec, JobSpec& js) {
  auto r = spec.find("report");
  if (r == spec.end()) return std::nullopt;
  if (!r->is_object()) return invalid("/report", "must be an object");
  auto p = r->find("percentiles");
  if (p == r->end()) return std::nullopt;
  if (!p->is_array() || p->empty() || p->size() > 12) {
    return invalid("/report/percentiles", "must be an array of 1 to 12 percentiles, like [50, 95, 99.9]");
  }
  std::vector<double> qs;
  for (std::size_t i = 0; i < p->size(); ++i) {
    const json& q = (*p)[i];
    if (!q.is_number() || !(q.get<double>() > 0 && q.get<double>() < 100)) {
      return invalid(fmt::format("/report/percentiles/{}", i), "must be a number between 0 and 100 (exclusive)");
    }
    if (std::find(qs.begin(), qs.end(), q.get<double>()) != qs.end()) {
      return invalid(fmt::format("/report/percentiles/{}", i), "appears twice");
    }
    qs.push_back(q.get<double>());
  }
  std::sort(qs.begin(), qs.end());
  js.report_percentiles = std::move(qs);
  return std::nullopt;
}

Result<ArrivalSpec> parse_arrival(const json& a) {
  ArrivalSpec out;
  if (!a.is_object()) return invalid("/arrival", "must be an object");
  if (auto p = a.find("process"); p != a.end()) {
    if (!p->is_string()) return invalid("/arrival/process", "must be a string");
    auto proc = parse_arrival_process(p->get<std::string>(), "/arrival/process");
    if (!proc) return proc.error();
    out.process = *proc;
  }
  auto b = fields::number(a, "burstiness", "/arrival", out.burstiness, fields::Sign::positive);
  if (!b) return b.error();
  out.burstiness = *b;
  // Only gamma gaps have a shape: any other process would send something else than recorded.
  if (out.process != ArrivalProcess::gamma && out.burstiness != 1.0) {
    return invalid("/arrival/burstiness",
                   fmt::format("applies to gamma arrivals only, and \"process\" is \"{}\": use \"process\": "
                               "\"gamma\" (or leave process out: burstiness then means gamma of that shape, as "
                               "in vLLM), or drop burstiness",
                               to_string(out.process)));
  }
  return out;
}

}  // namespace

void complete_arrival(json& spec) {
  if (!spec.is_object()) return;
  auto a = spec.find("arrival");
  if (a == spec.end() || !a->is_object() || a->contains("process")) return;
  auto b = a->find("burstiness");
  if (b != a->end() && b->is_number() && b->get<double>() != 1.0) (*a)["process"] = "gamma";
}

namespace {

// A block that belongs to another kind of job is refused, naming the block.
std::optional<Error> refuse_other_kinds_blocks(const json& spec, JobKind kind) {
  if (kind != JobKind::regression) {
    for (const char* block : {"regression", "quality", "judge"}) {
      if (spec.contains(block)) return invalid(std::string("/") + block, "belongs to a regression job");
    }
  }
  if (kind != JobKind::sweep && spec.contains("step")) {
    return invalid("/step", "belongs to a sweep job: its fixed-rate steps may end once decided");
  }
  if (kind != JobKind::scenario && spec.contains("scenario")) {
    return invalid("/scenario", "belongs to a scenario job (\"kind\": \"scenario\")");
  }
  const char* own = kind == JobKind::scenario     ? "a scenario job has a \"scenario\" block"
                    : kind == JobKind::regression ? "a regression job has a \"regression\" block"
                                                  : nullptr;
  if (own) {
    for (const char* block : {"sweep", "check"}) {
      if (spec.contains(block)) return invalid(std::string("/") + block, own);
    }
  }
  if (kind == JobKind::sweep && spec.contains("check")) {
    return invalid("/check", "belongs to a check job (\"kind\": \"check\")");
  }
  if (kind == JobKind::check && spec.contains("sweep")) {
    return invalid("/sweep", "belongs to a sweep job; a check job has a \"check\" block");
  }
  return std::nullopt;
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

// The blocks of the job's kind, each parsed into `js`.
std::optional<Error> parse_kind_blocks(const json& spec, JobSpec& js) {
  if (auto e = refuse_other_kinds_blocks(spec, js.kind)) return e;
  switch (js.kind) {
    case JobKind::scenario:
      if (js.arrival.process == ArrivalProcess::all_at_once) {
        return invalid("/arrival/process", "a scenario's rate varies in time: all_at_once has no rate");
      }
      return parse_scenario_block(spec, js);
    case JobKind::regression:
      if (js.arrival.process == ArrivalProcess::all_at_once) {
        return invalid("/arrival/process", "a regression job runs at a fixed rate: all_at_once is for check jobs");
      }
      return parse_regression_blocks(spec, js);
    case JobKind::sweep:
      return parse_sweep_blocks(spec, js);
    case JobKind::check: {
      if (!spec.contains("check")) return invalid("/check", "is required for a check job");
      auto c = parse_check(spec.at("check"), js.arrival.process);
      if (!c) return c.error();
      js.check = *c;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(JobKind k) noexcept {
  switch (k) {
    case JobKind::sweep:
      return "sweep";
    case JobKind::check:
      return "check";
    case JobKind::regression:
      return "regression";
    case JobKind::scenario:
      return "scenario";
  }
  return "sweep";
}

std::optional<JobKind> parse_job_kind(std::string_view s) noexcept {
  for (JobKind k : {JobKind::sweep, JobKind::check, JobKind::regression, JobKind::scenario})
    if (s == to_string(k)) return k;
  return std::nullopt;
}

Result<JobSpec> parse_job_spec(const json& spec) {
  if (!spec.is_object()) return invalid("", "the job spec must be a JSON object");
  JobSpec js;
  if (auto k = spec.find("kind"); k != spec.end()) {
    const auto kind = k->is_string() ? parse_job_kind(k->get<std::string>()) : std::nullopt;
    if (!kind) return invalid("/kind", "must be \"sweep\", \"check\", \"regression\" or \"scenario\"");
    js.kind = *kind;
  }
  if (auto n = spec.find("name"); n != spec.end()) {
    if (!n->is_string()) return invalid("/name", "must be a string");
    js.name = n->get<std::string>();
  }
  if (auto e = parse_target_block(spec, js)) return *e;
  if (spec.contains("workload")) {
    auto w = llm::parse_workload(spec.at("workload"));
    if (!w) return w.error();
    js.workload = *w;
  }
  if (auto a = spec.find("arrival"); a != spec.end()) {
    auto arrival = parse_arrival(*a);
    if (!arrival) return arrival.error();
    js.arrival = *arrival;
  }
  if (!spec.contains("slo")) return invalid("/slo", "is required");
  auto slo = parse_slo(spec.at("slo"));
  if (!slo) return slo.error();
  js.slo = std::move(*slo);
  if (auto e = parse_kind_blocks(spec, js)) return *e;
  if (auto b = spec.find("basis"); b != spec.end()) {
    if (!b->is_string()) return invalid("/basis", "must be a string");
    js.basis = b->get<std::string>();
  }
  if (auto e = parse_report_block(spec, js)) return *e;
  return js;
}

std::string target_field(const JobSpec& spec, Role role) {
  if (spec.kind != JobKind::regression) return "/target";
  return role == Role::baseline ? "/baseline/target" : "/candidate/target";
}

std::vector<std::pair<std::string, std::string>> side_urls(const JobSpec& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string a = target_field(spec, Role::baseline);
  if (!spec.metrics_url.empty()) out.emplace_back(a + "/metrics_url", spec.metrics_url);
  if (spec.prometheus) out.emplace_back(a + "/prometheus/url", spec.prometheus->url);
  if (spec.candidate) {
    const std::string b = target_field(spec, Role::candidate);
    out.emplace_back(b + "/base_url", spec.candidate->base_url);
    if (!spec.candidate->metrics_url.empty()) out.emplace_back(b + "/metrics_url", spec.candidate->metrics_url);
    if (spec.candidate->prometheus) out.emplace_back(b + "/prometheus/url", spec.candidate->prometheus->url);
  }
  if (spec.judge) out.emplace_back("/judge/target/base_url", spec.judge->base_url);
  if (spec.scenario) {
    if (!spec.scenario->readiness_url.empty())
      out.emplace_back("/scenario/readiness_url", spec.scenario->readiness_url);
    if (spec.scenario->replicas && spec.scenario->replicas->prometheus) {
      out.emplace_back("/scenario/replicas/prometheus/url", spec.scenario->replicas->prometheus->url);
    }
  }
  return out;
}

std::vector<double> summary_percentiles(const JobSpec& spec) {
  std::vector<double> out = spec.report_percentiles;
  for (double q : {50.0, 95.0, 99.0}) out.push_back(q);
  for (const auto& bound : spec.slo.latency)
    if (bound.percentile) out.push_back(*bound.percentile);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

// Every target object a spec may hold; their headers are secrets.
constexpr std::array<const char*, 4> kTargetPointers{"/target", "/baseline/target", "/candidate/target",
                                                     "/judge/target"};

}  // namespace

SplitSpec split_secrets(json spec) {
  SplitSpec out;
  out.secret_headers = json::object();
  if (!spec.is_object()) {
    out.visible = std::move(spec);
    return out;
  }
  for (const char* pointer : kTargetPointers) {
    const json::json_pointer at(pointer);
    if (!spec.contains(at) || !spec[at].is_object() || !spec[at].contains("headers")) continue;
    json& h = spec[at]["headers"];
    if (!h.is_object()) continue;
    // The job's own target keeps the flat form {"Header": "value"}; the others are kept under
    // their pointer (a header name never starts with '/').
    json& into = std::string_view(pointer) == "/target" ? out.secret_headers : out.secret_headers[pointer];
    if (!into.is_object()) into = json::object();
    for (auto& [k, v] : h.items()) {
      into[k] = v;
      v = "(secret)";
    }
  }
  out.visible = std::move(spec);
  return out;
}

json join_secrets(json visible, const json& secret_headers) {
  if (!secret_headers.is_object()) return visible;
  json flat = json::object();
  for (const auto& item : secret_headers.items()) {
    const std::string& k = item.key();
    const json& v = item.value();
    const bool elsewhere = !k.empty() && k[0] == '/' && v.is_object() &&
                           std::find_if(kTargetPointers.begin(), kTargetPointers.end(),
                                        [&k](const char* p) { return k == p; }) != kTargetPointers.end();
    if (elsewhere)
      visible[json::json_pointer(k)]["headers"] = v;
    else
      flat[k] = v;
  }
  if (!flat.empty()) visible["target"]["headers"] = flat;
  return visible;
}

}  // namespace capsweep::sweep

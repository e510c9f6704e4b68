#include "sweep/spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>

#include "core/fields.hpp"
#include "core/text.hpp"
#include "sweep/kinds.hpp"
#include "sweep/traffic.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

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
  out.base_url = out.target.replicas.empty() ? t.at("base_url").get<std::string>() : out.target.replicas.front().url;
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
  if (rules(js.kind).two_sides) {
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
  // Only a process whose gaps have a shape (gamma's) reads one: any other would send something
  // else than recorded.
  if (!arrival_row(out.process).burstiness && out.burstiness != 1.0) {
    return invalid("/arrival/burstiness",
                   fmt::format("applies to gamma arrivals only, and \"process\" is \"{}\": use \"process\": "
                               "\"gamma\" (or leave process out: burstiness then means gamma of that shape, as "
                               "in vLLM), or drop burstiness",
                               to_string(out.process)));
  }
  // A trace's replay: its speed and whether it loops; neither means anything to another process.
  auto speed = fields::number(a, "speed", "/arrival", out.speed, fields::Sign::positive);
  if (!speed) return speed.error();
  out.speed = *speed;
  if (auto l = a.find("loop"); l != a.end()) {
    if (!l->is_boolean()) return invalid("/arrival/loop", "must be true or false");
    out.loop = l->get<bool>();
  }
  if (out.process != ArrivalProcess::trace && (a.contains("speed") || a.contains("loop"))) {
    return invalid(a.contains("speed") ? "/arrival/speed" : "/arrival/loop",
                   "applies to a trace's replay only (\"process\": \"trace\")");
  }
  return out;
}

}  // namespace

bool trace_at_own_rate(const JobSpec& js) noexcept {
  return js.kind == JobKind::check ||
         (js.kind == JobKind::regression && js.regression.rate_rps == 0 && js.regression.from_sweep.empty());
}

namespace {

// A trace replays its own arrivals: in a check (and a regression with no rate of its own) at
// arrival.speed, looped or cut; where the job sets the rate (a sweep's steps, a regression's
// rate_rps, a scenario's profile) scaled to it and looped, so speed and loop are not the spec's
// to give. It needs a dataset (a trace's rows) in its own order.
std::optional<Error> check_trace(const JobSpec& js, const json& spec) {
  if (js.arrival.process != ArrivalProcess::trace) return std::nullopt;
  if (!js.workload.dataset) {
    return invalid("/workload/dataset", "a trace's replay needs the trace: a dataset uploaded with format=trace");
  }
  if (js.workload.dataset->shuffled) {
    return invalid("/workload/dataset/order", "a trace is replayed in its own order");
  }
  if (trace_at_own_rate(js)) return std::nullopt;
  const json& a = spec.at("arrival");
  for (const char* key : {"speed", "loop"}) {
    if (a.contains(key)) {
      return invalid(std::string("/arrival/") + key,
                     fmt::format("a {} job sets the replay's rate (the trace is scaled to it and loops): "
                                 "speed and loop are a check's",
                                 rules(js.kind).name));
    }
  }
  return std::nullopt;
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

// A block that another kind of job owns is refused, naming the block and its kind.
std::optional<Error> refuse_other_kinds_blocks(const json& spec, JobKind kind) {
  const KindRules& own = rules(kind);
  for (JobKind other : all_kinds()) {
    if (other == kind) continue;
    const KindRules& r = rules(other);
    for (const auto& block : r.blocks) {
      const bool shared = std::find(own.blocks.begin(), own.blocks.end(), block) != own.blocks.end();
      if (!shared && spec.contains(block)) {
        return invalid("/" + block, fmt::format("belongs to a {} job (\"kind\": \"{}\"); this is a {} job", r.name,
                                                r.name, own.name));
      }
    }
  }
  return std::nullopt;
}

// The names of the kinds in the table, for a message: "sweep", "check", ... or "scenario".
std::string kind_names() {
  std::string out;
  const auto kinds = all_kinds();
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) out += i + 1 == kinds.size() ? " or " : ", ";
    out += fmt::format("\"{}\"", to_string(kinds[i]));
  }
  return out;
}

}  // namespace

Result<JobSpec> parse_job_spec(const json& spec) {
  if (!spec.is_object()) return invalid("", "the job spec must be a JSON object");
  JobSpec js;
  if (auto k = spec.find("kind"); k != spec.end()) {
    const auto kind = k->is_string() ? parse_job_kind(k->get<std::string>()) : std::nullopt;
    if (!kind) return invalid("/kind", "must be " + kind_names());
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
  // The items of an API whose requests carry several (embeddings' inputs, rerank's documents).
  auto fitted = llm::fit_to_api(std::move(js.workload), js.target.api);
  if (!fitted) return fitted.error();
  js.workload = std::move(*fitted);
  if (auto a = spec.find("arrival"); a != spec.end()) {
    auto arrival = parse_arrival(*a);
    if (!arrival) return arrival.error();
    js.arrival = *arrival;
  }
  if (!spec.contains("slo")) return invalid("/slo", "is required");
  auto slo = parse_slo(spec.at("slo"));
  if (!slo) return slo.error();
  js.slo = std::move(*slo);
  // The blocks of the job's kind, by its parser; another kind's blocks are refused.
  if (auto e = refuse_other_kinds_blocks(spec, js.kind)) return *e;
  if (auto e = rules(js.kind).parse(spec, js)) return *e;
  if (auto e = check_trace(js, spec)) return *e;
  if (auto b = spec.find("basis"); b != spec.end()) {
    if (!b->is_string()) return invalid("/basis", "must be a string");
    js.basis = b->get<std::string>();
  }
  if (auto e = parse_report_block(spec, js)) return *e;
  if (auto a = spec.find("agents"); a != spec.end()) {
    if (!a->is_number_integer() || a->get<std::int64_t>() < 1 || a->get<std::int64_t>() > kMaxAgents) {
      return invalid("/agents",
                     fmt::format("must be a whole number from 1 to {} (load agents sharing each step)", kMaxAgents));
    }
    if (!rules(js.kind).agents) {
      return invalid("/agents", fmt::format("a {} job runs on capsweepd's own engine: load agents run sweep and check "
                                            "jobs' steps",
                                            rules(js.kind).name));
    }
    js.agents = a->get<std::uint32_t>();
  }
  // What the step's traffic may go with: sessions and what presumes independent requests,
  // what load agents may send (sweep/traffic.hpp).
  if (auto e = check_traffic(js)) return *e;
  return js;
}

std::string target_field(const JobSpec& spec, Role role) {
  if (!rules(spec.kind).two_sides) return "/target";
  return role == Role::baseline ? "/baseline/target" : "/candidate/target";
}

namespace {

// A target's host, or the first of its replicas' (target.base_urls) the allow-list refuses.
std::optional<RefusedHost> refused_target(const llm::Target& t, const std::string& field,
                                          const std::function<bool(std::string_view)>& allows) {
  if (t.replicas.empty()) {
    if (!allows(t.host)) return RefusedHost{true, field + "/base_url", t.host};
    return std::nullopt;
  }
  for (std::size_t k = 0; k < t.replicas.size(); ++k) {
    if (!allows(t.replicas[k].host))
      return RefusedHost{true, fmt::format("{}/base_urls/{}", field, k), t.replicas[k].host};
  }
  return std::nullopt;
}

}  // namespace

std::optional<RefusedHost> refused_host(const JobSpec& spec, const std::function<bool(std::string_view)>& allows) {
  if (auto r = refused_target(spec.target, target_field(spec), allows)) return r;
  for (const auto& [field, url] : side_urls(spec)) {
    const auto parsed = llm::parse_base_url({}, url, field);
    if (!parsed || !allows(parsed->host)) return RefusedHost{false, field, url};
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> side_urls(const JobSpec& spec) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string a = target_field(spec, Role::baseline);
  if (!spec.metrics_url.empty()) out.emplace_back(a + "/metrics_url", spec.metrics_url);
  if (spec.prometheus) out.emplace_back(a + "/prometheus/url", spec.prometheus->url);
  if (spec.candidate) {
    const std::string b = target_field(spec, Role::candidate);
    const auto& replicas = spec.candidate->target.replicas;
    if (replicas.empty()) out.emplace_back(b + "/base_url", spec.candidate->base_url);
    for (std::size_t k = 0; k < replicas.size(); ++k)
      out.emplace_back(fmt::format("{}/base_urls/{}", b, k), replicas[k].url);
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

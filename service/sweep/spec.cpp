#include "sweep/spec.hpp"

#include <cmath>
#include <limits>

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

Result<Nanos> seconds_at(const json& obj, const char* key, const std::string& field, Nanos fallback,
                         bool zero_ok) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  const std::string f = field + "/" + key;
  if (!it->is_number()) return invalid(f, "must be a number of seconds");
  const double s = it->get<double>();
  if (!std::isfinite(s) || s < 0 || (!zero_ok && s == 0)) {
    return invalid(f, zero_ok ? "must be zero or a positive number of seconds" : "must be a positive number of seconds");
  }
  if (s == 0) return Nanos{0};
  return duration_from_s(s, f);
}

template <class Int>
Result<Int> int_at(const json& obj, const char* key, const std::string& field, Int fallback, Int lo, Int hi) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  const std::string f = field + "/" + key;
  if (!it->is_number_integer() || it->get<long long>() < static_cast<long long>(lo) ||
      it->get<long long>() > static_cast<long long>(hi)) {
    return invalid(f, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return static_cast<Int>(it->get<long long>());
}

Result<double> positive_at(const json& obj, const char* key, const std::string& field, double fallback) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (!it->is_number() || !(it->get<double>() > 0) || !std::isfinite(it->get<double>())) {
    return invalid(field + "/" + key, "must be a positive number");
  }
  return it->get<double>();
}

Result<SweepSettings> parse_sweep(const json& j) {
  const std::string f = "/sweep";
  SweepSettings s;
  if (!j.is_object()) return invalid(f, "must be an object");
  auto steps = int_at<int>(j, "steps", f, s.steps, 1, 100);
  if (!steps) return steps.error();
  s.steps = *steps;
  auto d = seconds_at(j, "step_duration_s", f, s.step_duration, false);
  if (!d) return d.error();
  s.step_duration = *d;
  auto w = seconds_at(j, "warmup_s", f, s.warmup, true);
  if (!w) return w.error();
  s.warmup = *w;
  if (auto sp = j.find("spacing"); sp != j.end()) {
    if (*sp == "linear") s.spacing = Spacing::linear;
    else if (*sp == "geometric") s.spacing = Spacing::geometric;
    else return invalid(f + "/spacing", "must be \"linear\" or \"geometric\"");
  }
  auto saf = int_at<int>(j, "stop_after_failures", f, s.stop_after_failures, 1, 100);
  if (!saf) return saf.error();
  s.stop_after_failures = *saf;
  auto tol = positive_at(j, "tolerance", f, s.tolerance);
  if (!tol) return tol.error();
  if (*tol >= 1) return invalid(f + "/tolerance", "must be in (0, 1)");
  s.tolerance = *tol;
  auto ms = int_at<int>(j, "max_steps", f, s.max_steps, 1, 1000);
  if (!ms) return ms.error();
  s.max_steps = *ms;
  auto br = int_at<std::uint64_t>(j, "baseline_requests", f, s.baseline_requests, 1, 100'000);
  if (!br) return br.error();
  s.baseline_requests = *br;
  auto pr = int_at<std::uint64_t>(j, "probe_requests", f, s.probe_requests, 1, 1'000'000);
  if (!pr) return pr.error();
  s.probe_requests = *pr;
  auto pc = int_at<std::uint32_t>(j, "probe_concurrency", f, s.probe_concurrency, 1, 100'000);
  if (!pc) return pc.error();
  s.probe_concurrency = *pc;
  auto mc = int_at<std::uint32_t>(j, "max_concurrency", f, s.max_concurrency, 0, 100'000);
  if (!mc) return mc.error();
  s.max_concurrency = *mc;
  auto ef = positive_at(j, "escalation_factor", f, s.escalation_factor);
  if (!ef) return ef.error();
  if (*ef <= 1) return invalid(f + "/escalation_factor", "must be greater than 1");
  s.escalation_factor = *ef;
  if (j.contains("max_rate_rps")) {
    auto mr = positive_at(j, "max_rate_rps", f, 0);
    if (!mr) return mr.error();
    s.max_rate_rps = *mr;
  }
  auto dt = seconds_at(j, "drain_timeout_s", f, s.drain_timeout, false);
  if (!dt) return dt.error();
  s.drain_timeout = *dt;
  auto msd = seconds_at(j, "max_step_duration_s", f, s.max_step_duration, false);
  if (!msd) return msd.error();
  s.max_step_duration = *msd;
  if (s.warmup >= s.step_duration) return invalid(f + "/warmup_s", "must be shorter than step_duration_s");
  if (s.max_step_duration < s.warmup + s.step_duration) {
    return invalid(f + "/max_step_duration_s", "must be at least warmup_s + step_duration_s");
  }
  return s;
}

Result<CheckSettings> parse_check(const json& j, ArrivalProcess process) {
  const std::string f = "/check";
  CheckSettings c;
  if (!j.is_object()) return invalid(f, "must be an object");
  if (process == ArrivalProcess::all_at_once) {
    c.rate_rps = std::numeric_limits<double>::infinity();
    if (j.contains("rate_rps")) return invalid(f + "/rate_rps", "must be absent with all_at_once arrivals (the rate is infinite)");
  } else {
    if (!j.contains("rate_rps")) return invalid(f + "/rate_rps", "is required: the fixed request rate of the check");
    auto r = positive_at(j, "rate_rps", f, 0);
    if (!r) return r.error();
    c.rate_rps = *r;
  }
  auto d = seconds_at(j, "duration_s", f, c.duration, false);
  if (!d) return d.error();
  c.duration = *d;
  auto w = seconds_at(j, "warmup_s", f, Nanos{0}, true);
  if (!w) return w.error();
  c.warmup = *w;
  auto mc = int_at<std::uint32_t>(j, "max_concurrency", f, 0, 0, 100'000);
  if (!mc) return mc.error();
  c.max_concurrency = *mc;
  if (j.contains("requests")) {
    auto n = int_at<std::uint64_t>(j, "requests", f, 0, 1, 10'000'000);
    if (!n) return n.error();
    c.requests = *n;
  }
  auto dt = seconds_at(j, "drain_timeout_s", f, c.drain_timeout, false);
  if (!dt) return dt.error();
  c.drain_timeout = *dt;
  if (process == ArrivalProcess::all_at_once && !c.requests) {
    return invalid(f + "/requests", "is required with all_at_once arrivals");
  }
  if (process != ArrivalProcess::all_at_once && c.warmup >= c.duration) {
    return invalid(f + "/warmup_s", "must be shorter than duration_s");
  }
  return c;
}

}  // namespace

Result<JobSpec> parse_job_spec(const json& spec) {
  if (!spec.is_object()) return invalid("", "the job spec must be a JSON object");
  JobSpec js;
  if (auto k = spec.find("kind"); k != spec.end()) {
    if (*k == "sweep") js.kind = JobKind::sweep;
    else if (*k == "check") js.kind = JobKind::check;
    else return invalid("/kind", "must be \"sweep\" or \"check\"");
  }
  if (auto n = spec.find("name"); n != spec.end()) {
    if (!n->is_string()) return invalid("/name", "must be a string");
    js.name = n->get<std::string>();
  }
  if (!spec.contains("target")) return invalid("/target", "is required");
  auto t = llm::parse_target(spec.at("target"));
  if (!t) return t.error();
  js.target = std::move(*t);
  js.base_url = spec.at("target").at("base_url").get<std::string>();
  if (auto m = spec.at("target").find("metrics_url"); m != spec.at("target").end()) {
    if (!m->is_string()) return invalid("/target/metrics_url", "must be a URL");
    auto parsed = llm::parse_base_url({}, m->get<std::string>(), "/target/metrics_url");
    if (!parsed) return parsed.error();
    js.metrics_url = m->get<std::string>();
  }
  if (spec.contains("workload")) {
    auto w = llm::parse_workload(spec.at("workload"));
    if (!w) return w.error();
    if (spec.at("workload").contains("dataset")) {
      return invalid("/workload/dataset", "datasets are not read by capsweepd; use synthesised prompts");
    }
    js.workload = *w;
  }
  if (auto a = spec.find("arrival"); a != spec.end()) {
    if (!a->is_object()) return invalid("/arrival", "must be an object");
    if (auto p = a->find("process"); p != a->end()) {
      if (!p->is_string()) return invalid("/arrival/process", "must be a string");
      auto proc = parse_arrival_process(p->get<std::string>(), "/arrival/process");
      if (!proc) return proc.error();
      js.arrival.process = *proc;
    }
    if (auto b = a->find("burstiness"); b != a->end()) {
      if (!b->is_number() || !(b->get<double>() > 0) || !std::isfinite(b->get<double>())) {
        return invalid("/arrival/burstiness", "must be a positive number");
      }
      js.arrival.burstiness = b->get<double>();
    }
  }
  if (!spec.contains("slo")) return invalid("/slo", "is required");
  auto slo = parse_slo(spec.at("slo"));
  if (!slo) return slo.error();
  js.slo = std::move(*slo);
  if (js.kind == JobKind::sweep) {
    if (spec.contains("check")) return invalid("/check", "belongs to a check job (\"kind\": \"check\")");
    if (js.arrival.process == ArrivalProcess::all_at_once) {
      return invalid("/arrival/process", "a sweep steps through fixed rates: all_at_once is for check jobs");
    }
    auto s = parse_sweep(spec.value("sweep", json::object()));
    if (!s) return s.error();
    js.sweep = *s;
  } else {
    if (spec.contains("sweep")) return invalid("/sweep", "belongs to a sweep job; a check job has a \"check\" block");
    if (!spec.contains("check")) return invalid("/check", "is required for a check job");
    auto c = parse_check(spec.at("check"), js.arrival.process);
    if (!c) return c.error();
    js.check = *c;
  }
  if (auto b = spec.find("basis"); b != spec.end()) {
    if (!b->is_string()) return invalid("/basis", "must be a string");
    js.basis = b->get<std::string>();
  }
  return js;
}

SplitSpec split_secrets(json spec) {
  SplitSpec out;
  out.secret_headers = json::object();
  if (spec.is_object() && spec.contains("target") && spec["target"].is_object() && spec["target"].contains("headers")) {
    json& h = spec["target"]["headers"];
    if (h.is_object()) {
      for (auto& [k, v] : h.items()) {
        out.secret_headers[k] = v;
        v = "(secret)";
      }
    }
  }
  out.visible = std::move(spec);
  return out;
}

json join_secrets(json visible, const json& secret_headers) {
  if (secret_headers.is_object() && !secret_headers.empty()) visible["target"]["headers"] = secret_headers;
  return visible;
}

}  // namespace capsweep::sweep

#include "sweep/agents.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "sweep/manager_parts.hpp"

namespace capsweep::sweep {

using json = nlohmann::json;

json to_json(const StepOrder& o) {
  return {{"kind", to_string(o.kind)},
          {"phase", o.phase},
          {"rate_rps", std::isfinite(o.rate_rps) ? json(o.rate_rps) : json("inf")},
          {"duration_ns", o.duration.count()},
          {"warmup_ns", o.warmup.count()},
          {"requests", o.requests ? json(*o.requests) : json(nullptr)},
          {"concurrency", o.concurrency},
          {"closed_loop", o.closed_loop},
          {"rerun", o.rerun},
          {"role", o.role ? json(to_string(*o.role)) : json(nullptr)},
          {"round", o.round},
          {"decided", o.decided}};
}

Result<StepOrder> parse_step_order(const json& j) {
  if (!j.is_object()) return invalid("/order", "the step's order is an object");
  StepOrder o;
  try {
    const auto kind = parse_step_kind(j.at("kind").get<std::string>());
    if (!kind) return invalid("/order/kind", "not a step kind");
    o.kind = *kind;
    o.phase = j.at("phase").get<std::string>();
    const json& rate = j.at("rate_rps");
    o.rate_rps = rate.is_string() && rate == "inf" ? INFINITY : rate.get<double>();
    o.duration = Nanos(j.at("duration_ns").get<std::int64_t>());
    o.warmup = Nanos(j.at("warmup_ns").get<std::int64_t>());
    if (!j.at("requests").is_null()) o.requests = j.at("requests").get<std::uint64_t>();
    o.concurrency = j.at("concurrency").get<std::uint32_t>();
    o.closed_loop = j.at("closed_loop").get<bool>();
    o.rerun = j.at("rerun").get<bool>();
    if (!j.at("role").is_null()) {
      const auto role = parse_role(j.at("role").get<std::string>());
      if (!role) return invalid("/order/role", "baseline or candidate");
      o.role = *role;
    }
    o.round = j.at("round").get<int>();
    o.decided = j.at("decided").get<bool>();
  } catch (const json::exception& e) {
    return invalid("/order", fmt::format("the step's order is malformed: {}", e.what()));
  }
  return o;
}

json to_json(const AgentStep& s) {
  json j = {{"job", s.job},
            {"job_id", s.job_id},
            {"order", to_json(s.order)},
            {"index", s.index},
            {"tokens_per_word", s.tokens_per_word},
            {"max_connections", s.max_connections}};
  if (s.dataset) j["dataset"] = {{"format", s.dataset_format.value_or("jsonl")}, {"content", *s.dataset}};
  return j;
}

Result<AgentStep> parse_agent_step(const json& j) {
  if (!j.is_object()) return invalid("/payload", "the step's payload is an object");
  AgentStep s;
  const auto job = j.find("job");
  if (job == j.end() || !job->is_object()) return invalid("/payload/job", "the job's spec is an object");
  s.job = *job;
  const auto id = j.find("job_id");
  if (id == j.end() || !id->is_string() || id->get<std::string>().empty()) {
    return invalid("/payload/job_id", "the job's id is a string");
  }
  s.job_id = id->get<std::string>();
  auto order = parse_step_order(j.value("order", json()));
  if (!order) return order.error();
  s.order = *order;
  const auto index = j.find("index");
  if (index == j.end() || !index->is_number_integer() || index->get<int>() < 0) {
    return invalid("/payload/index", "the step's index is a whole number");
  }
  s.index = index->get<int>();
  const auto tpw = j.find("tokens_per_word");
  if (tpw == j.end() || !tpw->is_number() || !(tpw->get<double>() > 0)) {
    return invalid("/payload/tokens_per_word", "a number above 0");
  }
  s.tokens_per_word = tpw->get<double>();
  const auto cap = j.find("max_connections");
  if (cap == j.end() || !cap->is_number_unsigned()) return invalid("/payload/max_connections", "a whole number");
  s.max_connections = cap->get<std::uint32_t>();
  if (const auto d = j.find("dataset"); d != j.end()) {
    if (!d->is_object() || !d->contains("content") || !(*d)["content"].is_string()) {
      return invalid("/payload/dataset", "the dataset is {format, content}");
    }
    s.dataset = (*d)["content"].get<std::string>();
    s.dataset_format = d->value("format", "jsonl");
  }
  return s;
}

Result<loadgen::StepSpec> load_step_spec(const JobSpec& spec, const StepOrder& order, int index,
                                         const std::string& job_id, const llm::Workload& workload,
                                         std::uint32_t max_connections, bool on_agents) {
  loadgen::StepSpec ss = step_spec(spec, order, index);
  if (ss.mode == loadgen::Mode::rate && ss.arrival.process == ArrivalProcess::trace) {
    auto replay = trace_replay(spec, order, workload.trace_offsets(), {ss.duration, ss.requests});
    if (!replay) return Error{errc::invalid_argument, "the trace cannot be replayed: " + replay.error().message, ""};
    ss.schedule = std::make_shared<const Schedule>(std::move(*replay));
  }
  apply_prefix_cache(ss, spec, job_id);
  if (max_connections > 0 && (ss.concurrency == 0 || ss.concurrency > max_connections)) {
    ss.concurrency = max_connections;
  }
  if (on_agents) ss.decide.reset();
  return ss;
}

}  // namespace capsweep::sweep

namespace capsweep::sweep {

std::string agent_job_name(const std::string& run_id) {
  std::string name = "capsweep-agents-";
  for (const char c : run_id) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u))
      name.push_back(static_cast<char>(std::tolower(u)));
    else if (!name.empty() && name.back() != '-')
      name.push_back('-');
    if (name.size() >= 63) break;
  }
  while (!name.empty() && name.back() == '-') name.pop_back();
  return name;
}

json agent_job(const AgentJobSettings& s) {
  const std::string name = agent_job_name(s.run_id);
  // A label value: at most 63 characters of [A-Za-z0-9._-], alphanumeric at both ends.
  const std::string run_label = name.substr(std::string("capsweep-agents-").size());
  const json labels = {{"app.kubernetes.io/name", "capsweep-agent"}, {"capsweep.dev/run", run_label}};
  json metadata = {{"name", name}, {"labels", labels}};
  if (!s.namespace_.empty()) metadata["namespace"] = s.namespace_;
  const json container = {
      {"name", "agent"},
      {"image", s.image},
      {"command", {"capsweep-agent"}},
      {"args", {"--server", s.server, "--run", s.run_id}},
      {"env",
       {{{"name", "CAPSWEEP_AGENT_TOKEN"},
         {"valueFrom", {{"secretKeyRef", {{"name", s.secret}, {"key", s.secret_key}}}}}}}},
      {"resources", {{"requests", {{"cpu", "2"}, {"memory", "512Mi"}}}, {"limits", {{"memory", "2Gi"}}}}},
      {"securityContext",
       {{"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"runAsNonRoot", true},
        {"capabilities", {{"drop", {"ALL"}}}}}}};
  const json pod_spec = {
      {"restartPolicy", "Never"},
      {"automountServiceAccountToken", false},
      {"securityContext", {{"runAsNonRoot", true}, {"seccompProfile", {{"type", "RuntimeDefault"}}}}},
      {"topologySpreadConstraints",
       {{{"maxSkew", 1},
         {"topologyKey", "kubernetes.io/hostname"},
         {"whenUnsatisfiable", "DoNotSchedule"},
         {"labelSelector", {{"matchLabels", labels}}}}}},
      {"containers", {container}}};
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", std::move(metadata)},
          {"spec",
           {{"completionMode", "Indexed"},
            {"completions", s.agents},
            {"parallelism", s.agents},
            {"backoffLimitPerIndex", s.backoff_per_index},
            {"maxFailedIndexes", 0},
            {"podReplacementPolicy", "Failed"},
            {"ttlSecondsAfterFinished", 3600},
            {"template", {{"metadata", {{"labels", labels}}}, {"spec", pod_spec}}}}}};
}

bool rfc1123_label(std::string_view s) noexcept {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

bool rfc1123_subdomain(std::string_view s) noexcept {
  if (s.empty() || s.size() > 253) return false;
  for (std::size_t start = 0;;) {
    const std::size_t dot = s.find('.', start);
    if (!rfc1123_label(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start)))
      return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

bool secret_key_name(std::string_view s) noexcept {
  if (s.empty() || s.size() > 253) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_';
  });
}

std::optional<Error> agent_job_names_error(const AgentJobSettings& s) {
  if (!s.namespace_.empty() && !rfc1123_label(s.namespace_)) {
    return invalid("/namespace",
                   "a namespace is an RFC 1123 label: 1 to 63 of a-z, 0-9 and '-', alphanumeric at both ends");
  }
  if (!rfc1123_subdomain(s.secret)) {
    return invalid("/secret",
                   "a Secret's name is an RFC 1123 subdomain: labels of a-z, 0-9 and '-' joined by '.', "
                   "at most 253 characters");
  }
  if (!secret_key_name(s.secret_key)) {
    return invalid("/secret_key", "a Secret's key is 1 to 253 of a-z, A-Z, 0-9, '-', '.' and '_'");
  }
  return std::nullopt;
}

}  // namespace capsweep::sweep

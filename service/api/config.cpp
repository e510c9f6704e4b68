#include "api/config.hpp"

#include <arpa/inet.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "api/schema.hpp"
#include "llm/target.hpp"
#include "sweep/agents.hpp"

namespace capsweep::api {

std::uint32_t usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return static_cast<std::uint32_t>(n);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

// agents.kubernetes, its defaults filled: apply needs the agents' image and capsweepd's URL.
Result<sweep::AgentJobApi> parse_agent_job_api(const nlohmann::json& k) {
  sweep::AgentJobApi a;
  a.apply = k.at("apply").get<bool>();
  a.api_server = k.at("api_server").get<std::string>();
  a.namespace_ = k.at("namespace").get<std::string>();
  a.token_file = k.at("token_file").get<std::string>();
  a.ca_file = k.at("ca_file").get<std::string>();
  a.namespace_file = k.at("namespace_file").get<std::string>();
  a.image = k.at("image").get<std::string>();
  a.server = k.at("server").get<std::string>();
  a.secret = k.at("secret").get<std::string>();
  a.secret_key = k.at("secret_key").get<std::string>();
  a.backoff_per_index = k.at("backoff_per_index").get<std::uint32_t>();
  if (!a.apply) return a;
  if (a.image.empty()) return invalid("/agents/kubernetes/image", "the agents' image is required when apply is true");
  if (a.server.empty()) {
    return invalid("/agents/kubernetes/server", "the URL agents dial capsweepd at is required when apply is true");
  }
  if (auto t = llm::parse_base_url(llm::Target{}, a.server, "/agents/kubernetes/server"); !t) return t.error();
  sweep::AgentJobSettings names;
  names.namespace_ = a.namespace_;
  names.secret = a.secret;
  names.secret_key = a.secret_key;
  if (auto bad = sweep::agent_job_names_error(names)) {
    return invalid("/agents/kubernetes" + bad->field, bad->message);
  }
  return a;
}

}  // namespace

ServiceConfig default_config() {
  auto c = parse_config(nlohmann::json::object());
  return std::move(c.value());
}

Result<ServiceConfig> parse_config(const nlohmann::json& input) {
  static const SchemaValidator validator(embedded_schema("config.schema.json"));
  if (auto ok = validator.validate(input); !ok) return ok.error();
  nlohmann::json doc = input;
  validator.apply_defaults(doc);
  ServiceConfig c;
  c.listen = doc.at("listen").get<std::string>();
  c.db = doc.at("db").get<std::string>();
  for (const auto& t : doc.at("tokens")) {
    c.tokens.push_back({t.at("token").get<std::string>(), t.at("role") == "submit", t.value("name", std::string()),
                        t.at("role") == "agent"});
  }
  auto allow = AllowList::parse(doc.at("allow_targets").get<std::vector<std::string>>());
  if (!allow) return allow.error();
  c.allow = std::move(*allow);
  c.max_concurrent_sweeps = doc.at("max_concurrent_sweeps").get<int>();
  c.engine_threads = doc.at("engine_threads").get<std::uint32_t>();
  if (c.engine_threads == 0) c.engine_threads = usable_cores();
  const auto& l = doc.at("limits");
  c.limits.max_rate_rps = l.at("max_rate_rps").get<double>();
  c.limits.max_step_duration_s = l.at("max_step_duration_s").get<double>();
  c.limits.max_total_sweep_s = l.at("max_total_sweep_s").get<double>();
  c.limits.max_connections_per_sweep = l.at("max_connections_per_sweep").get<std::uint32_t>();
  c.limits.max_queued_sweeps = l.at("max_queued_sweeps").get<std::uint64_t>();
  c.limits.max_body_bytes = l.at("max_body_bytes").get<std::size_t>();
  c.limits.max_dataset_bytes = l.at("max_dataset_bytes").get<std::size_t>();
  c.limits.max_json_depth = l.at("max_json_depth").get<int>();
  c.limits.max_requests_per_step = l.at("max_requests_per_step").get<std::uint64_t>();
  c.limits.max_quality_items = l.at("max_quality_items").get<std::uint64_t>();
  c.limits.max_prompt_tokens = l.at("max_prompt_tokens").get<std::uint32_t>();
  c.limits.max_output_tokens = l.at("max_output_tokens").get<std::uint32_t>();
  c.limits.max_api_connections = l.at("max_api_connections").get<std::size_t>();
  c.limits.max_api_connections_per_client = l.at("max_api_connections_per_client").get<std::size_t>();
  c.limits.header_timeout_s = l.at("header_timeout_s").get<double>();
  c.limits.max_response_bytes = l.at("max_response_bytes").get<std::size_t>();
  c.limits.max_sse_event_bytes = l.at("max_sse_event_bytes").get<std::size_t>();
  auto hosts = AllowList::parse(doc.at("allowed_hosts").get<std::vector<std::string>>(), "/allowed_hosts");
  if (!hosts) return hosts.error();
  c.allowed_hosts = std::move(*hosts);
  c.tls_ca_dir = doc.at("tls_ca_dir").get<std::string>();
  c.insecure_no_auth = doc.at("insecure_no_auth").get<bool>();
  c.retention.max_age_days = doc.at("retention").at("max_age_days").get<double>();
  c.retention.max_sweeps = doc.at("retention").at("max_sweeps").get<std::uint64_t>();
  c.agents_max_clock_error_ms = doc.at("agents").at("max_clock_error_ms").get<double>();
  c.agents_join_timeout_s = doc.at("agents").at("join_timeout_s").get<double>();
  auto jobs = parse_agent_job_api(doc.at("agents").at("kubernetes"));
  if (!jobs) return jobs.error();
  c.agent_jobs = std::move(*jobs);
  return c;
}

}  // namespace capsweep::api

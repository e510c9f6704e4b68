#include "sweep/agents.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "sweep/manager_parts.hpp"

namespace capsweep::sweep {

using json = nlohmann::json;

loadgen::AgentStep agent_step(const json& job, const StepOrder& order, loadgen::LoadSettings settings) {
  loadgen::AgentStep sent;
  sent.load = std::move(settings);
  const json::json_pointer target(order.role == Role::candidate ? "/candidate/target" : "/target");
  sent.target = job.contains(target) ? job.at(target) : json::object();
  sent.workload = job.value("workload", json::object());
  return sent;
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

#pragma once
// capsweepd makes its load agents' Indexed Job itself (config agents.kubernetes.apply):
// through the Kubernetes API, with the service account's token and CA, a Role that allows
// only jobs create, get and delete in its namespace (deploy/k8s/agents). A job on agents
// creates its Job when it starts and deletes it when it ends; one left resumable keeps it.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "core/error.hpp"

namespace capsweep::sweep {

// Where the Kubernetes API is and what the Job holds (agents.kubernetes in the config).
struct AgentJobApi {
  bool apply = false;
  std::string api_server;  // https://host:port ("" at startup: the in-cluster service)
  std::string namespace_;  // "" at startup: the service account's (namespace_file)
  std::string token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
  std::string ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
  std::string namespace_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";
  std::string image;   // the agents' image (capsweepd's own)
  std::string server;  // the URL agents dial capsweepd at
  std::string secret = "capsweep-agent-token";
  std::string secret_key = "token";
  std::uint32_t backoff_per_index = 1;
};

// Fills api_server from KUBERNETES_SERVICE_HOST / _PORT and namespace_ from namespace_file
// where the config left them empty. An error names the setting to give instead.
Result<AgentJobApi> resolve_agent_job_api(AgentJobApi api);

// The Job of a run (sweep::agent_job with the settings above).
nlohmann::json agent_job_for(const AgentJobApi& api, const std::string& run_id, std::uint32_t agents);

// Creates the Job (POST .../namespaces/NS/jobs). A Job of that name already there (a
// resumed run) is kept. An error says what the API answered (its Status message).
Result<std::string> create_agent_job(const AgentJobApi& api, const nlohmann::json& job);
// Deletes the run's Job and its pods (propagationPolicy Background); a Job already gone is fine.
Result<std::string> delete_agent_job(const AgentJobApi& api, const std::string& name);

}  // namespace capsweep::sweep

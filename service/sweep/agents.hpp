#pragma once
// A job's load steps on load agents (spec field "agents"): what an agent is sent for a step,
// and the one function both capsweepd and every agent make the step's engine settings with,
// so that they plan one schedule (their digests must agree, or the step is invalid).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "llm/workload.hpp"
#include "loadgen/step_runner.hpp"
#include "sweep/spec.hpp"
#include "sweep/step.hpp"

namespace capsweep::sweep {

// A step as an agent is sent it (the "payload" of the agent protocol's step message).
struct AgentStep {
  nlohmann::json job;  // the job's spec as stored, its secret headers joined
  std::string job_id;
  StepOrder order;
  int index = 0;                      // the step's index in the job
  double tokens_per_word = 1;         // capsweepd's calibration: the same prompt text
  std::uint32_t max_connections = 0;  // the service's cap on requests in flight (0: none)
  // The workload's dataset, when it names one: its format and content.
  std::optional<std::string> dataset_format, dataset;
};
nlohmann::json to_json(const AgentStep& s);
Result<AgentStep> parse_agent_step(const nlohmann::json& j);

nlohmann::json to_json(const StepOrder& o);
Result<StepOrder> parse_step_order(const nlohmann::json& j);

// The engine settings of a job's load step (baseline, probe, a rate, a level, a check's
// step, a regression's run): its schedule (a trace replayed), its prefix cache, the service's
// cap on requests in flight. `on_agents`: the step is shared by load agents, so it runs its
// fixed length (a decision needs every request as it ends, on one process).
Result<loadgen::StepSpec> load_step_spec(const JobSpec& spec, const StepOrder& order, int index,
                                         const std::string& job_id, const llm::Workload& workload,
                                         std::uint32_t max_connections, bool on_agents);

}  // namespace capsweep::sweep

namespace capsweep::sweep {

// The Kubernetes Indexed Job that runs a job's load agents: one pod per index
// (JOB_COMPLETION_INDEX), no index retried past backoff_per_index and the Job failed at the
// first index that fails for good (maxFailedIndexes 0), a pod replaced only once it has
// failed (podReplacementPolicy Failed: never two agents of one index at once), one agent per
// node by topology spread. Each agent dials `server` with the token in `secret`/`secret_key`.
struct AgentJobSettings {
  std::string run_id;
  std::uint32_t agents = 1;
  std::string image = "capsweep:latest";
  std::string server = "http://capsweepd:8080";
  std::string secret = "capsweep-agent-token";
  std::string secret_key = "token";
  std::string namespace_;  // "" : the one kubectl applies it in
  std::uint32_t backoff_per_index = 1;
};
// A pure function of its settings (the same settings, the same Job).
nlohmann::json agent_job(const AgentJobSettings& s);
// The Job's name for a run: "capsweep-agents-" and the run id made a DNS label.
std::string agent_job_name(const std::string& run_id);

// Kubernetes' names: a namespace is an RFC 1123 label (1 to 63 of [a-z0-9-], alphanumeric at
// both ends); a Secret's name an RFC 1123 subdomain (such labels joined by '.', at most 253
// characters); a Secret's key 1 to 253 of [-._a-zA-Z0-9].
bool rfc1123_label(std::string_view s) noexcept;
bool rfc1123_subdomain(std::string_view s) noexcept;
bool secret_key_name(std::string_view s) noexcept;
// The first name of `s` that Kubernetes would refuse, as an error naming its field
// ("/namespace" when one is given, "/secret", "/secret_key"); nullopt when all are names.
std::optional<Error> agent_job_names_error(const AgentJobSettings& s);

}  // namespace capsweep::sweep

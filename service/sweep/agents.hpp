#pragma once
// A job's load steps on load agents (spec field "agents"): what an agent is sent for a step
// (the step's settings, planned on both sides by loadgen::plan_load_step: their digests must
// agree, or the step is invalid), and the Kubernetes Job that runs the agents.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "loadgen/load_plan.hpp"
#include "sweep/spec.hpp"
#include "sweep/step.hpp"

namespace capsweep::sweep {

// What a load agent is sent for a step of `job` (its spec as stored, secret headers joined):
// the step's settings, the target its side sends to (a regression's candidate's for the
// candidate's runs) and the workload block. The caller adds the calibration and the dataset.
loadgen::AgentStep agent_step(const nlohmann::json& job, const StepOrder& order, loadgen::LoadSettings settings);

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

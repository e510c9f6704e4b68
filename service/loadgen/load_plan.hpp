#pragma once
// One load step, planned once: the settings a job's step is made of (what it sends, how long,
// how many, its draw of prompts and times, the service's cap) and the one pure function that
// makes the engine's StepSpec of them. capsweepd plans a step with it; a load agent is sent
// the same settings and plans the same step (their schedule digests must agree). The agent
// needs nothing of the job's spec, its store or its manager: this, the target and the
// workload.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/lengths.hpp"
#include "core/schedule.hpp"
#include "llm/workload.hpp"
#include "loadgen/step_runner.hpp"

namespace capsweep::loadgen {

// What a step's load is: one request at a time (a sweep's baseline), a burst sent at once
// (the throughput probe), arrivals (at a rate, all at once or a trace's), N users each
// sending its next request after its last answer, or a schedule made beforehand (a
// scenario's profile, set on the StepSpec by its caller).
enum class StepShape { one_by_one, burst, arrivals, users, profile };
std::string_view to_string(StepShape s) noexcept;
std::optional<StepShape> parse_step_shape(std::string_view s) noexcept;

struct LoadSettings {
  StepShape shape = StepShape::arrivals;
  ArrivalSpec arrival;  // the job's arrival process; arrivals at a rate send `rate_rps`
  double rate_rps = 0;  // arrivals: the step's rate (a trace is scaled to it when > 0)
  Nanos duration{0};    // the measured part (0: count-based)
  Nanos warmup{0};
  std::optional<std::uint64_t> requests;
  std::uint32_t concurrency = 0;            // users: in flight; else a cap (0: none)
  std::optional<LengthDist> think_time_ms;  // users: the wait after an answer
  std::uint64_t seed = 0;                   // the workload's seed
  std::uint64_t draw = 0;                   // the step's draw (its index; a regression's round)
  Nanos request_timeout = std::chrono::seconds(600);
  Nanos drain_timeout = std::chrono::seconds(60);
  GoodputBounds goodput;
  llm::PrefixCache prefix_cache = llm::PrefixCache::as_found;
  std::string job_id;                 // the prompts' salt under a cold or warm cache
  TraceId trace_id;                   // the step's trace (step_trace_id of the job and step)
  std::uint32_t max_connections = 0;  // the service's cap on requests in flight (0: none)
  std::uint32_t engine_threads = 1;
  // capsweepd's side only (an agent's share is never decided early and never scrapes):
  std::optional<DecidedStop> decide;
  std::string metrics_url;
  std::optional<observe::PromSource> prometheus;
};

// The settings on the agents' wire: everything but decide, metrics_url and prometheus.
nlohmann::json to_json(const LoadSettings& s);
// Errors name the field below "/payload/load".
Result<LoadSettings> parse_load_settings(const nlohmann::json& j);

// The engine's settings of the step: its mode, schedule limits, seed and request indices,
// its trace replayed (`trace_offsets`: the workload's, for an arrival process "trace"), its
// prompts' salt, the connection cap. Errors: a trace that cannot be replayed.
Result<StepSpec> plan_load_step(const LoadSettings& s, const std::vector<Nanos>& trace_offsets);

// What a load agent is sent for a step (the protocol's "payload"): the step's settings, the
// target and workload blocks it sends with (as the job's spec has them, secret headers
// joined), capsweepd's calibration (the same prompt text) and the workload's dataset.
struct AgentStep {
  LoadSettings load;
  nlohmann::json target;
  nlohmann::json workload = nlohmann::json::object();
  double tokens_per_word = 1;
  std::optional<std::string> dataset_format, dataset;
};
nlohmann::json to_json(const AgentStep& s);
Result<AgentStep> parse_agent_step(const nlohmann::json& j);

}  // namespace capsweep::loadgen

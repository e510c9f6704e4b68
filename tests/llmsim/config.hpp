#pragma once
// capsweep-llmsim's settings: the engine model, the API surface, cold start and faults.
// Read from a JSON file (keys as below) and/or command-line flags; flags win.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "llmsim/engine.hpp"

namespace capsweep::llmsim {

// While loading: refuse connections, answer 503, or take requests and hold them until loaded
// (a replica whose readiness lies: it accepts traffic and gives no first token for a while).
enum class ColdStartMode { refuse, unavailable, hold };  // "refuse" | "503" | "hold"

// An adapter (a LoRA adapter, or another model) served beside the base model: requests naming
// it run on an engine of its own, with the base's parameters but for the costs it sets.
struct AdapterConfig {
  std::string name;
  std::optional<double> decode_base_ms, decode_per_seq_ms, prefill_ms_per_token;
  // Its engine: the base's with this adapter's costs.
  EngineParams params(const EngineParams& base) const;
};

struct SimConfig {
  std::string listen = "127.0.0.1:8000";
  // Replicas of the server, each on its own engine, listening on the port and those after it
  // (a port of 0: each its own the system picks): a fleet addressed directly (target.base_urls).
  std::uint32_t replicas = 1;
  std::string model = "sim-8b";
  EngineParams engine;
  std::vector<AdapterConfig> adapters;  // served beside `model`, each on an engine of its own
  std::uint32_t tokens_per_chunk = 1;   // tokens per SSE content chunk (first chunk: 1)
  std::uint32_t events_per_write = 1;   // SSE events grouped into one socket write
  // A reasoning model: the first N tokens of a chat answer are reasoning (delta
  // "reasoning_content", counted in usage's completion_tokens_details.reasoning_tokens) before
  // the visible content; max_tokens bounds both together, as vLLM's does.
  std::uint32_t reasoning_tokens = 0;
  double load_time_s = 0;  // cold start: model loading time
  ColdStartMode cold_start_mode = ColdStartMode::refuse;
  bool ready_lies = false;     // /health says 200 while loading
  double error_rate = 0;       // probability of an HTTP 500
  double disconnect_rate = 0;  // probability of dropping a stream mid-way
  double stall_ms = 0;         // pause of a stalled stream
  double stall_rate = 0;       // probability that a stream stalls once
  // Quality faults (regression rehearsals), each a probability per answer of its kind:
  double json_corrupt_rate = 0;        // a response_format answer that is not valid JSON / not the schema's
  double tool_call_corrupt_rate = 0;   // a tool call with broken arguments or an unknown name
  double overrun_max_tokens_rate = 0;  // an answer longer than max_tokens
  double nondeterminism_rate = 0;      // a temperature-0 answer that differs from the last one to the prompt
  double wrong_answer_rate = 0;        // a wrong result to an arithmetic question
  std::uint64_t seed = 0;
  double drain_s = 30;  // on SIGTERM, how long running streams may finish
};

// Applies the keys of a JSON object onto `cfg` (unknown keys are errors naming the key).
Result<SimConfig> apply_json(SimConfig cfg, const nlohmann::json& j);
// Checks ranges; errors name the setting.
Result<SimConfig> validate(const SimConfig& cfg);

}  // namespace capsweep::llmsim

#include "llmsim/config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

namespace capsweep::llmsim {
namespace {

template <class T>
Result<T> get(const nlohmann::json& v, const std::string& key) {
  const std::string field = "/" + key;
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return invalid(field, "must be true or false");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return invalid(field, "must be a string");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
      return invalid(field, "must be a non-negative integer");
    }
  } else {
    if (!v.is_number()) return invalid(field, "must be a number");
  }
  return v.get<T>();
}

bool probability(double p) {
  return std::isfinite(p) && p >= 0 && p <= 1;
}

// "adapters": [{"name", "decode_base_ms", "decode_per_seq_ms", "prefill_ms_per_token"}].
Result<std::vector<AdapterConfig>> parse_adapters(const nlohmann::json& v) {
  if (!v.is_array() || v.size() > 16) return invalid("/adapters", "must be a list of at most 16 adapters");
  std::vector<AdapterConfig> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string at = "/adapters/" + std::to_string(i);
    const nlohmann::json& a = v[i];
    if (!a.is_object() || !a.contains("name") || !a["name"].is_string() || a["name"].get<std::string>().empty())
      return invalid(at + "/name", "an adapter is an object with a non-empty name");
    AdapterConfig c{a["name"].get<std::string>(), {}, {}, {}};
    for (const auto& [key, value] : a.items()) {
      if (key == "name") continue;
      std::optional<double>* slot = key == "decode_base_ms"         ? &c.decode_base_ms
                                    : key == "decode_per_seq_ms"    ? &c.decode_per_seq_ms
                                    : key == "prefill_ms_per_token" ? &c.prefill_ms_per_token
                                                                    : nullptr;
      if (!slot) return invalid(at + "/" + key, "unknown adapter setting");
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 60'000)
        return invalid(at + "/" + key, "must be a number of ms in [0, 60000]");
      *slot = value.get<double>();
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

EngineParams AdapterConfig::params(const EngineParams& base) const {
  EngineParams p = base;
  p.decode_base_ms = decode_base_ms.value_or(base.decode_base_ms);
  p.decode_per_seq_ms = decode_per_seq_ms.value_or(base.decode_per_seq_ms);
  p.prefill_ms_per_token = prefill_ms_per_token.value_or(base.prefill_ms_per_token);
  return p;
}

Result<SimConfig> apply_json(SimConfig cfg, const nlohmann::json& j) {
  if (!j.is_object()) return invalid("", "the configuration must be a JSON object");
  for (const auto& [key, v] : j.items()) {
#define CAPSWEEP_SIM_KEY(name, member, type)    \
  if (key == name) {                            \
    auto r = get<type>(v, key);                 \
    if (!r) return r.error();                   \
    member = static_cast<decltype(member)>(*r); \
    continue;                                   \
  }
    CAPSWEEP_SIM_KEY("listen", cfg.listen, std::string)
    CAPSWEEP_SIM_KEY("replicas", cfg.replicas, std::uint64_t)
    CAPSWEEP_SIM_KEY("model", cfg.model, std::string)
    CAPSWEEP_SIM_KEY("max_num_seqs", cfg.engine.max_num_seqs, std::uint64_t)
    CAPSWEEP_SIM_KEY("kv_cache_tokens", cfg.engine.kv_cache_tokens, std::uint64_t)
    CAPSWEEP_SIM_KEY("max_model_len", cfg.engine.max_model_len, std::uint64_t)
    CAPSWEEP_SIM_KEY("decode_base_ms", cfg.engine.decode_base_ms, double)
    CAPSWEEP_SIM_KEY("decode_per_seq_ms", cfg.engine.decode_per_seq_ms, double)
    CAPSWEEP_SIM_KEY("prefill_ms_per_token", cfg.engine.prefill_ms_per_token, double)
    CAPSWEEP_SIM_KEY("prefix_cache_blocks", cfg.engine.prefix_cache_blocks, std::uint64_t)
    CAPSWEEP_SIM_KEY("tokens_per_chunk", cfg.tokens_per_chunk, std::uint64_t)
    CAPSWEEP_SIM_KEY("events_per_write", cfg.events_per_write, std::uint64_t)
    CAPSWEEP_SIM_KEY("reasoning_tokens", cfg.reasoning_tokens, std::uint64_t)
    CAPSWEEP_SIM_KEY("load_time_s", cfg.load_time_s, double)
    CAPSWEEP_SIM_KEY("ready_lies", cfg.ready_lies, bool)
    CAPSWEEP_SIM_KEY("error_rate", cfg.error_rate, double)
    CAPSWEEP_SIM_KEY("disconnect_rate", cfg.disconnect_rate, double)
    CAPSWEEP_SIM_KEY("json_corrupt_rate", cfg.json_corrupt_rate, double)
    CAPSWEEP_SIM_KEY("tool_call_corrupt_rate", cfg.tool_call_corrupt_rate, double)
    CAPSWEEP_SIM_KEY("overrun_max_tokens_rate", cfg.overrun_max_tokens_rate, double)
    CAPSWEEP_SIM_KEY("nondeterminism_rate", cfg.nondeterminism_rate, double)
    CAPSWEEP_SIM_KEY("wrong_answer_rate", cfg.wrong_answer_rate, double)
    CAPSWEEP_SIM_KEY("stall_ms", cfg.stall_ms, double)
    CAPSWEEP_SIM_KEY("stall_rate", cfg.stall_rate, double)
    CAPSWEEP_SIM_KEY("seed", cfg.seed, std::uint64_t)
    CAPSWEEP_SIM_KEY("drain_s", cfg.drain_s, double)
#undef CAPSWEEP_SIM_KEY
    if (key == "adapters") {
      auto a = parse_adapters(v);
      if (!a) return a.error();
      cfg.adapters = std::move(*a);
      continue;
    }
    if (key == "cold_start_mode") {
      auto r = get<std::string>(v, key);
      if (!r) return r.error();
      if (*r == "refuse")
        cfg.cold_start_mode = ColdStartMode::refuse;
      else if (*r == "503")
        cfg.cold_start_mode = ColdStartMode::unavailable;
      else if (*r == "hold")
        cfg.cold_start_mode = ColdStartMode::hold;
      else
        return invalid("/cold_start_mode", "must be \"refuse\", \"503\" or \"hold\"");
      continue;
    }
    return invalid("/" + key, "unknown setting");
  }
  return cfg;
}

Result<SimConfig> validate(const SimConfig& cfg) {
  if (auto e = validate(cfg.engine); !e) return e.error();
  if (cfg.model.empty()) return invalid("/model", "must not be empty");
  for (std::size_t i = 0; i < cfg.adapters.size(); ++i) {
    const std::string& name = cfg.adapters[i].name;
    const bool taken = name == cfg.model || std::any_of(cfg.adapters.begin(), cfg.adapters.begin() + i,
                                                        [&](const AdapterConfig& a) { return a.name == name; });
    if (name.empty() || taken) return invalid("/adapters/" + std::to_string(i) + "/name", "must be a name of its own");
  }
  if (cfg.tokens_per_chunk < 1) return invalid("/tokens_per_chunk", "must be >= 1");
  if (cfg.reasoning_tokens > cfg.engine.max_model_len) {
    return invalid("/reasoning_tokens", "must be at most max_model_len");
  }
  if (cfg.replicas < 1 || cfg.replicas > 16) return invalid("/replicas", "must be in [1, 16]");
  if (cfg.events_per_write < 1 || cfg.events_per_write > 4096) {
    return invalid("/events_per_write", "must be in [1, 4096]");
  }
  if (!std::isfinite(cfg.load_time_s) || cfg.load_time_s < 0) return invalid("/load_time_s", "must be >= 0");
  if (!probability(cfg.error_rate)) return invalid("/error_rate", "must be a probability in [0, 1]");
  if (!probability(cfg.disconnect_rate)) return invalid("/disconnect_rate", "must be a probability in [0, 1]");
  for (const auto& [rate, name] : {std::pair{cfg.json_corrupt_rate, "/json_corrupt_rate"},
                                   std::pair{cfg.tool_call_corrupt_rate, "/tool_call_corrupt_rate"},
                                   std::pair{cfg.overrun_max_tokens_rate, "/overrun_max_tokens_rate"},
                                   std::pair{cfg.nondeterminism_rate, "/nondeterminism_rate"},
                                   std::pair{cfg.wrong_answer_rate, "/wrong_answer_rate"}}) {
    if (!probability(rate)) return invalid(name, "must be a probability in [0, 1]");
  }
  if (!probability(cfg.stall_rate)) return invalid("/stall_rate", "must be a probability in [0, 1]");
  if (!std::isfinite(cfg.stall_ms) || cfg.stall_ms < 0) return invalid("/stall_ms", "must be >= 0");
  if (!std::isfinite(cfg.drain_s) || cfg.drain_s < 0) return invalid("/drain_s", "must be >= 0");
  return cfg;
}

}  // namespace capsweep::llmsim

#include "llmsim/options.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

namespace capsweep::llmsim {

namespace {

// The settings of a --config file, read before the flags so that flags override it; an exit
// code when the file cannot be read or holds a bad setting.
std::optional<int> apply_config_file(SimConfig& cfg, int argc, char** argv) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) != "--config") continue;
    std::ifstream in(argv[i + 1]);
    if (!in) {
      fmt::print(stderr, "capsweep-llmsim: cannot read config file {}\n", argv[i + 1]);
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    if (j.is_discarded()) {
      fmt::print(stderr, "capsweep-llmsim: {} is not valid JSON\n", argv[i + 1]);
      return 2;
    }
    auto applied = apply_json(cfg, j);
    if (!applied) {
      fmt::print(stderr, "capsweep-llmsim: {}: {}: {}\n", argv[i + 1], applied.error().field, applied.error().message);
      return 2;
    }
    cfg = *applied;
  }
  return std::nullopt;
}

// The server and its continuous-batching engine.
void add_engine_options(CLI::App& app, SimConfig& cfg) {
  app.add_option("--listen", cfg.listen, "HOST:PORT to listen on")->capture_default_str();
  app.add_option("--replicas", cfg.replicas,
                 "replicas, each its own engine, on PORT, PORT+1, ... (PORT 0: ports the system picks)")
      ->capture_default_str();
  app.add_option("--model", cfg.model, "the model name served")->capture_default_str();
  app.add_option("--max-num-seqs", cfg.engine.max_num_seqs, "most sequences in a batch")->capture_default_str();
  app.add_option("--kv-cache-tokens", cfg.engine.kv_cache_tokens,
                 "KV cache size in tokens (prompt + max output reserved per request)")
      ->capture_default_str();
  app.add_option("--max-model-len", cfg.engine.max_model_len, "longest prompt + output accepted")
      ->capture_default_str();
  app.add_option("--decode-base-ms", cfg.engine.decode_base_ms, "fixed time of an iteration")->capture_default_str();
  app.add_option("--decode-per-seq-ms", cfg.engine.decode_per_seq_ms, "iteration time per running sequence")
      ->capture_default_str();
  app.add_option("--prefill-ms-per-token", cfg.engine.prefill_ms_per_token, "iteration time per prompt token admitted")
      ->capture_default_str();
  app.add_option("--prefix-cache-blocks", cfg.engine.prefix_cache_blocks,
                 "prefix caching: blocks of 16 prompt tokens kept (LRU); cached blocks are not prefilled (0: off)")
      ->capture_default_str();
  app.add_option("--tokens-per-chunk", cfg.tokens_per_chunk, "tokens per SSE content chunk after the first")
      ->capture_default_str();
  app.add_option("--events-per-write", cfg.events_per_write, "SSE events grouped into one socket write")
      ->capture_default_str();
  app.add_option("--reasoning-tokens", cfg.reasoning_tokens,
                 "chat answers: the first N tokens are reasoning_content, before the visible content")
      ->capture_default_str();
  app.add_option("--seed", cfg.seed, "seed of the generated text and the faults")->capture_default_str();
  app.add_option("--drain-s", cfg.drain_s, "on SIGTERM, seconds running streams may take to finish")
      ->capture_default_str();
}

// The cold start: loading time, what a request meets meanwhile, and a lying /health.
void add_cold_start_options(CLI::App& app, SimConfig& cfg, std::string& cold_start) {
  app.add_option("--load-time-s", cfg.load_time_s, "cold start: seconds spent loading the model")
      ->capture_default_str();
  app.add_option("--cold-start-mode", cold_start,
                 "while loading: refuse connections, answer 503, or hold requests until loaded")
      ->check(CLI::IsMember({"refuse", "503", "hold"}))
      ->capture_default_str();
  app.add_flag("--ready-lies", cfg.ready_lies, "/health answers 200 while the model is still loading");
}

// The faults a rehearsal injects, each a probability per request (or per stream).
void add_fault_options(CLI::App& app, SimConfig& cfg) {
  app.add_option("--error-rate", cfg.error_rate, "probability of an HTTP 500")->capture_default_str();
  app.add_option("--disconnect-rate", cfg.disconnect_rate, "probability of dropping a stream mid-way")
      ->capture_default_str();
  app.add_option("--json-corrupt-rate", cfg.json_corrupt_rate,
                 "probability that a response_format answer is not valid JSON (or not the schema's)")
      ->capture_default_str();
  app.add_option("--tool-call-corrupt-rate", cfg.tool_call_corrupt_rate,
                 "probability that a tool call has broken arguments or names no offered tool")
      ->capture_default_str();
  app.add_option("--overrun-max-tokens-rate", cfg.overrun_max_tokens_rate,
                 "probability that an answer runs past max_tokens")
      ->capture_default_str();
  app.add_option("--nondeterminism-rate", cfg.nondeterminism_rate,
                 "probability that a temperature-0 answer differs from the one before")
      ->capture_default_str();
  app.add_option("--wrong-answer-rate", cfg.wrong_answer_rate,
                 "probability of a wrong result to an arithmetic question")
      ->capture_default_str();
  app.add_option("--stall-ms", cfg.stall_ms, "pause of a stalled stream")->capture_default_str();
  app.add_option("--stall-rate", cfg.stall_rate, "probability that a stream stalls once")->capture_default_str();
}

std::string cold_start_name(ColdStartMode mode) {
  return mode == ColdStartMode::refuse ? "refuse" : mode == ColdStartMode::unavailable ? "503" : "hold";
}

ColdStartMode cold_start_mode(const std::string& name) {
  return name == "503" ? ColdStartMode::unavailable : name == "hold" ? ColdStartMode::hold : ColdStartMode::refuse;
}

}  // namespace

std::variant<SimConfig, int> parse_options(int argc, char** argv) {
  SimConfig cfg;
  if (auto failed = apply_config_file(cfg, argc, argv)) return *failed;

  CLI::App app{"capsweep-llmsim: a simulated OpenAI-compatible LLM server (continuous batching)"};
  std::string config_file, cold_start = cold_start_name(cfg.cold_start_mode);
  app.add_option("--config", config_file, "JSON file with the settings below (flags override it)");
  add_engine_options(app, cfg);
  add_cold_start_options(app, cfg, cold_start);
  add_fault_options(app, cfg);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  cfg.cold_start_mode = cold_start_mode(cold_start);

  auto valid = validate(cfg);
  if (!valid) {
    fmt::print(stderr, "capsweep-llmsim: {}: {}\n", valid.error().field, valid.error().message);
    return 2;
  }
  return cfg;
}

}  // namespace capsweep::llmsim

#include "llmsim/config.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep::llmsim;
using json = nlohmann::json;

TEST_CASE("llmsim config: JSON keys apply onto the defaults") {
  auto cfg = apply_json(SimConfig{}, json::parse(R"({"model": "m", "max_num_seqs": 8,
      "decode_base_ms": 5.5, "cold_start_mode": "503", "ready_lies": true, "error_rate": 0.1, "replicas": 3})"))
                 .value();
  CHECK(cfg.model == "m");
  CHECK(cfg.replicas == 3);
  CHECK(cfg.engine.max_num_seqs == 8);
  CHECK(cfg.engine.decode_base_ms == 5.5);
  CHECK(cfg.cold_start_mode == ColdStartMode::unavailable);
  CHECK(cfg.ready_lies);
  CHECK(cfg.error_rate == 0.1);
  CHECK(cfg.listen == "127.0.0.1:8000");
  CHECK(validate(cfg).has_value());
}

TEST_CASE("llmsim config: bad settings name the key") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"({"max_num_seqs": -1})", "/max_num_seqs"},           {R"({"decode_base_ms": "8"})", "/decode_base_ms"},
      {R"({"cold_start_mode": "slow"})", "/cold_start_mode"}, {R"({"ready_lies": 1})", "/ready_lies"},
      {R"({"reasoning_tokens": "8"})", "/reasoning_tokens"},  {R"({"mystery": 1})", "/mystery"},
  };
  for (const auto& [text, field] : cases) {
    INFO(text);
    auto r = apply_json(SimConfig{}, json::parse(text));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
  }
  CHECK_FALSE(apply_json(SimConfig{}, json::array()).has_value());
  const std::vector<std::pair<std::string, std::string>> ranges{
      {R"({"error_rate": 1.5})", "/error_rate"},
      {R"({"disconnect_rate": -0.1})", "/disconnect_rate"},
      {R"({"events_per_write": 0})", "/events_per_write"},
      {R"({"tokens_per_chunk": 0})", "/tokens_per_chunk"},
      {R"({"reasoning_tokens": 99999999})", "/reasoning_tokens"},
      {R"({"max_num_seqs": 0})", "/max_num_seqs"},
      {R"({"stall_ms": -5})", "/stall_ms"},
      {R"({"json_corrupt_rate": 2})", "/json_corrupt_rate"},
      {R"({"tool_call_corrupt_rate": -1})", "/tool_call_corrupt_rate"},
      {R"({"overrun_max_tokens_rate": 1.01})", "/overrun_max_tokens_rate"},
      {R"({"nondeterminism_rate": -0.5})", "/nondeterminism_rate"},
      {R"({"wrong_answer_rate": 7})", "/wrong_answer_rate"},
      {R"({"replicas": 0})", "/replicas"},
      {R"({"replicas": 17})", "/replicas"},
  };
  for (const auto& [text, field] : ranges) {
    INFO(text);
    auto r = validate(apply_json(SimConfig{}, json::parse(text)).value());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
  }
}

TEST_CASE("llmsim config: adapters take the base engine's parameters but for the costs they set") {
  auto cfg = apply_json(SimConfig{}, json::parse(R"({"decode_base_ms": 5, "max_num_seqs": 32,
      "adapters": [{"name": "a1", "decode_base_ms": 20}, {"name": "a2", "prefill_ms_per_token": 0.1}]})"));
  REQUIRE(cfg.has_value());
  REQUIRE(validate(*cfg).has_value());
  REQUIRE(cfg->adapters.size() == 2);
  const EngineParams a1 = cfg->adapters[0].params(cfg->engine), a2 = cfg->adapters[1].params(cfg->engine);
  CHECK(a1.decode_base_ms == 20);
  CHECK(a1.max_num_seqs == 32);
  CHECK(a1.prefill_ms_per_token == cfg->engine.prefill_ms_per_token);
  CHECK(a2.decode_base_ms == 5);  // the base's, whatever the order of the keys
  CHECK(a2.prefill_ms_per_token == 0.1);
  const std::vector<std::pair<std::string, std::string>> bad{
      {R"({"adapters": {}})", "/adapters"},
      {R"({"adapters": [{"decode_base_ms": 1}]})", "/adapters/0/name"},
      {R"({"adapters": [{"name": ""}]})", "/adapters/0/name"},
      {R"({"adapters": [{"name": "a", "decode_base_ms": -1}]})", "/adapters/0/decode_base_ms"},
      {R"({"adapters": [{"name": "a", "max_num_seqs": 4}]})", "/adapters/0/max_num_seqs"},
  };
  for (const auto& [text, field] : bad) {
    INFO(text);
    auto r = apply_json(SimConfig{}, json::parse(text));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
  }
  for (const char* text :
       {R"({"adapters": [{"name": "sim-8b"}]})", R"({"adapters": [{"name": "a"}, {"name": "a"}]})"}) {
    INFO(text);
    auto r = validate(apply_json(SimConfig{}, json::parse(text)).value());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field.rfind("/adapters/", 0) == 0);
  }
}

#include "llmsim/config.hpp"
#include "llmsim/prometheus_text.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep::llmsim;
using json = nlohmann::json;

TEST_CASE("llmsim config: JSON keys apply onto the defaults") {
  auto cfg = apply_json(SimConfig{}, json::parse(R"({"model": "m", "max_num_seqs": 8,
      "decode_base_ms": 5.5, "cold_start_mode": "503", "ready_lies": true, "error_rate": 0.1})")).value();
  CHECK(cfg.model == "m");
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
      {R"({"max_num_seqs": -1})", "/max_num_seqs"},
      {R"({"decode_base_ms": "8"})", "/decode_base_ms"},
      {R"({"cold_start_mode": "slow"})", "/cold_start_mode"},
      {R"({"ready_lies": 1})", "/ready_lies"},
      {R"({"mystery": 1})", "/mystery"},
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
      {R"({"max_num_seqs": 0})", "/max_num_seqs"},
      {R"({"stall_ms": -5})", "/stall_ms"},
  };
  for (const auto& [text, field] : ranges) {
    INFO(text);
    auto r = validate(apply_json(SimConfig{}, json::parse(text)).value());
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
  }
}

TEST_CASE("llmsim prometheus: histograms render cumulative buckets, sum and count") {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // inclusive upper bound
  h.observe(0.5);
  h.observe(3.0);
  std::string out;
  h.render(out, "vllm:e2e_request_latency_seconds", "help text", "model_name=\"m\"");
  CHECK(out.find("# TYPE vllm:e2e_request_latency_seconds histogram\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"0.1\"} 2\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"1\"} 3\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} 3.65\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 4\n") != std::string::npos);
  std::string g;
  render_sample(g, "vllm:num_requests_running", "gauge", "h", "model_name=\"m\"", 3);
  CHECK(g == "# HELP vllm:num_requests_running h\n# TYPE vllm:num_requests_running gauge\n"
             "vllm:num_requests_running{model_name=\"m\"} 3\n");
}

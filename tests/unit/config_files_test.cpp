// The example files under config/ parse with the project's own parsers.
#include "core/slo.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"
#include "llmsim/config.hpp"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

using json = nlohmann::json;

namespace {
json read(const std::string& relative) {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/" + relative);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}
}  // namespace

TEST_CASE("config files: the demo sweep's target, workload and SLO parse") {
  const json spec = read("config/sweeps/demo.json");
  CHECK(capsweep::llm::parse_target(spec.at("target")).has_value());
  CHECK(capsweep::llm::parse_workload(spec.at("workload")).has_value());
  auto slo = capsweep::parse_slo(spec.at("slo"));
  REQUIRE(slo.has_value());
  CHECK(slo->latency.size() == 2);
}

TEST_CASE("config files: the llmsim example is valid and equals the defaults") {
  auto cfg = capsweep::llmsim::apply_json({}, read("config/llmsim.json"));
  REQUIRE(cfg.has_value());
  CHECK(capsweep::llmsim::validate(*cfg).has_value());
  const capsweep::llmsim::SimConfig defaults;
  CHECK(cfg->engine.max_num_seqs == defaults.engine.max_num_seqs);
  CHECK(cfg->engine.decode_base_ms == defaults.engine.decode_base_ms);
  CHECK(cfg->engine.decode_per_seq_ms == defaults.engine.decode_per_seq_ms);
  CHECK(cfg->engine.prefill_ms_per_token == defaults.engine.prefill_ms_per_token);
  CHECK(cfg->engine.kv_cache_tokens == defaults.engine.kv_cache_tokens);
}

// Sessions whose conversation the server keeps (history "server_state", the Responses API's
// previous_response_id) against llmsim, locally and on two load agents (in this process): every
// turn continues the answer before it, and the server counts the whole conversation at every
// turn, k user turns of P and k - 1 answers of O.
#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "integration/llmsim_fixture.hpp"
#include "support/service_fixture.hpp"

using namespace capsweep;
using json = nlohmann::json;

namespace {

json kept_sessions_check(const testing::SimFixture& sim) {
  return {{"kind", "check"},
          {"target",
           {{"base_url", "http://127.0.0.1:" + std::to_string(sim.endpoint().port())},
            {"api", "responses"},
            {"model", "sim-8b"}}},
          {"workload",
           {{"prompt_tokens", {{"dist", "fixed"}, {"value", 8}}},
            {"output_tokens", {{"dist", "fixed"}, {"value", 4}}},
            {"sessions", {{"turns", 3}, {"history", "server_state"}}}}},
          {"arrival", {{"process", "poisson"}}},
          {"slo", {{"ttft_ms", {{"p95", 800}}}}},
          {"check", {{"rate_rps", 6}, {"duration_s", 3}, {"warmup_s", 0}}}};
}

// The ok rows of requests.csv as (turn, the server's count of the prompt).
std::vector<std::pair<int, int>> ok_turns(const std::string& csv) {
  std::vector<std::pair<int, int>> out;
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::istringstream in(line);
    for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
    if (cells.size() < 15 || cells[11] != "ok") continue;
    out.emplace_back(std::stoi(cells[14]), std::stoi(cells[8]));
  }
  return out;
}

}  // namespace

TEST_CASE("responses sessions: server_state turns continue their answers, locally and on two agents") {
  testing::SimFixture sim(testing::fast_sim());
  testing::Service s("responses-sessions", std::nullopt, true);
  json spec = kept_sessions_check(sim);
  const json local = s.run_check(spec, 0);
  spec["agents"] = 2;
  const json shared = s.run_check(spec, 2);
  CHECK(shared["summary"]["agents"]["parts"] == 2);
  for (const json& step : {local, shared}) {
    const json& sessions = step["summary"]["sessions"];
    INFO(step["summary"].dump());
    CHECK(sessions["history"] == "server_state");
    CHECK(sessions["broken"] == 0);  // no turn named an answer the server did not keep
    CHECK(sessions["completed"].get<int>() > 0);
    const auto rows = ok_turns(s.call("GET", "/v1/sweeps/" + step.value("job_id", "") + "/requests.csv").body);
    std::vector<int> per_turn(4, 0);
    for (const auto& [turn, prompt] : rows) {
      REQUIRE(turn >= 1);
      REQUIRE(turn <= 3);
      ++per_turn[static_cast<std::size_t>(turn)];
      CHECK(prompt == 8 * turn + 4 * (turn - 1));
    }
    CHECK(per_turn[1] > 0);
    CHECK(per_turn[3] > 0);
  }
}

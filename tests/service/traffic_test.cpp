// Traffic shapes against capsweep-llmsim through capsweepd's API: a reasoning model whose
// first visible token comes after its reasoning. The figures checked are the simulator's
// model, predicted exactly: with a fixed iteration time d and R reasoning tokens, the first
// visible token comes R iterations after the first token, so TTFO - TTFT = R x d.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

bool ended(const json& v) {
  const auto s = v.value("status", "");
  return s == "succeeded" || s == "failed" || s == "cancelled";
}

}  // namespace

TEST_CASE("traffic: a reasoning model's TTFO - TTFT is its reasoning tokens x the iteration time") {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 10;  // every iteration 10 ms, whatever runs
  cfg.engine.decode_per_seq_ms = 0;
  cfg.engine.prefill_ms_per_token = 0;
  cfg.reasoning_tokens = 20;
  SimFixture sim(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  const json spec = {
      {"name", "reasoning check"},
      {"kind", "check"},
      {"target", {{"base_url", url}, {"api", "chat"}, {"model", "sim-8b"}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 50}}},
        {"output_tokens", {{"dist", "fixed"}, {"value", 64}}},
        {"seed", 3}}},
      {"arrival", {{"process", "poisson"}}},
      {"check", {{"rate_rps", 10}, {"duration_s", 9}, {"warmup_s", 1}}},
      // TTFT easily met; the first visible token 200 ms later cannot meet 100 ms.
      {"slo", {{"ttft_ms", {{"p95", 150}}}, {"ttfo_ms", {{"p95", 100}}}, {"max_error_rate", 0.01}}}};
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body)["id"].get<std::string>();
  const json view = d.wait_for(id, ended, 60s);
  INFO(view.dump(1));
  REQUIRE(view["status"] == "succeeded");
  CHECK(view["result"]["verdict"] == "fail");
  const json steps = d.get_json("/v1/sweeps/" + id + "/steps");
  REQUIRE(steps["steps"].size() == 1);
  const json& s = steps["steps"][0]["summary"];
  const auto completed = s["completed"].get<std::uint64_t>();
  REQUIRE(completed > 50);
  CHECK(s["requests_with_reasoning"] == completed);
  CHECK(s["total_reasoning_tokens"] == 20 * completed);     // usage's completion_tokens_details
  CHECK(s["total_visible_tokens"] == 44 * completed);       // max_tokens bounds both
  CHECK(s["total_output_tokens"] == 64 * completed);
  // The model's prediction: 20 iterations of 10 ms (timer slack on a loaded machine is the
  // only error, and it applies to both ends alike).
  const double gap = s["mean_ttfo_ms"].get<double>() - s["mean_ttft_ms"].get<double>();
  CHECK(gap == Approx(200).margin(15));
  CHECK(s["median_ttfo_ms"].get<double>() - s["median_ttft_ms"].get<double>() == Approx(200).margin(15));
  CHECK(s["mean_itl_reasoning_ms"].get<double>() == Approx(10).margin(2));
  CHECK(s["mean_itl_output_ms"].get<double>() == Approx(10).margin(2));
  // The limiting criterion is the first visible token, not the first token.
  const json& criteria = view["result"]["criteria"];
  bool ttfo_failed = false, ttft_passed = false;
  for (const auto& c : criteria) {
    if (c.value("name", "") == "p95_ttfo_ms") ttfo_failed = c.value("verdict", "") == "fail";
    if (c.value("name", "") == "p95_ttft_ms") ttft_passed = c.value("verdict", "") == "pass";
  }
  CHECK(ttfo_failed);
  CHECK(ttft_passed);
}

TEST_CASE("traffic: a spec's ttfo_ms bound is checked like every latency bound") {
  llmsim::SimConfig cfg;
  SimFixture sim(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  json spec = sim_job(url, "bad ttfo");
  spec["kind"] = "check";
  spec["check"] = {{"rate_rps", 1}, {"duration_s", 2}};
  spec["slo"]["ttfo_ms"] = {{"p95", -3}};
  auto r = d.post("/v1/sweeps", spec.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "").rfind("/slo/ttfo_ms", 0) == 0);
  spec["slo"]["ttfo_ms"] = {{"p200", 5}};
  r = d.post("/v1/sweeps", spec.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "").rfind("/slo/ttfo_ms", 0) == 0);
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());  // nothing stored
}

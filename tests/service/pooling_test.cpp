// Embeddings and rerank targets through capsweepd against capsweep-llmsim: answers of no
// generated tokens, measured by their E2EL, their items (inputs, documents) counted; each
// figure predicted from the simulator's model, where every item is a prefill-only sequence.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"
#include "support/sanitized.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

std::string base_url(const SimFixture& sim) {
  return loopback_url(sim.endpoint().port());
}

// A check of `api` at a constant 8 requests/s for 8 s (1 s warm-up), bounded by E2EL.
json pooling_check(const SimFixture& sim, const std::string& api, const std::string& items_key, int items,
                   int item_tokens) {
  json spec = sim_job(base_url(sim), api + " check");
  spec["kind"] = "check";
  spec["target"]["api"] = api;
  spec["workload"] = {{"prompt_tokens", {{"dist", "fixed"}, {"value", item_tokens}}},
                      {items_key, {{"dist", "fixed"}, {"value", items}}},
                      {"seed", 7}};
  spec["arrival"] = {{"process", "constant"}};
  spec["check"] = {{"rate_rps", 8}, {"duration_s", 8}, {"warmup_s", 1}};
  spec["slo"] = {{"e2el_ms", {{"p95", 1000}}}};
  return spec;
}

// Runs `spec` to its end on `d` (bounded) and returns its one step's summary.
json run_check(const Daemon& d, const json& spec) {
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body)["id"].get<std::string>();
  const json view = d.wait_for(id, job_ended, 90s);
  INFO(view.dump(1));
  REQUIRE(view["status"] == "succeeded");
  const json steps = d.get_json("/v1/sweeps/" + id + "/steps")["steps"];
  REQUIRE(steps.size() == 1);
  return steps[0]["summary"];
}

// What an answer of no tokens has and has not: no TTFT, TPOT, ITL or TTFO (null, not 0).
void check_no_token_latencies(const json& m) {
  for (const char* key :
       {"mean_ttft_ms", "p95_ttft_ms", "mean_tpot_ms", "p99_itl_ms", "mean_ttfo_ms", "mean_ttft_sent_ms"}) {
    INFO(key);
    CHECK(m.at(key).is_null());
  }
  CHECK(m["total_output_tokens"] == 0);
  CHECK(m["output_throughput"] == 0);
  CHECK(m["mean_e2el_ms"].is_number());
}

}  // namespace

TEST_CASE("apis: an embeddings check's E2EL and inputs/s match llmsim's model within 10%") {
  // Each request: 8 inputs of 256 tokens, 8 prefill-only sequences admitted at once into an
  // idle engine (a request every 125 ms, each done in ~51): one iteration of
  // decode_base + 8 x decode_per_seq + 2048 x prefill_ms_per_token.
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const json m = run_check(d, pooling_check(sim, "embeddings", "inputs_per_request", 8, 256));
  INFO(m.dump());
  const llmsim::EngineParams e;
  const double model_e2el = e.decode_base_ms + 8 * e.decode_per_seq_ms + 2048 * e.prefill_ms_per_token;
  const auto completed = m["completed"].get<std::uint64_t>();
  REQUIRE(completed >= 50);
  CHECK(m["failed"] == 0);
  CHECK(m["mean_e2el_ms"].get<double>() == Approx(model_e2el).epsilon(model_margin(0.10)));
  CHECK(m["p50_e2el_ms"].get<double>() == Approx(model_e2el).epsilon(model_margin(0.10)));
  CHECK(m["input_throughput"].get<double>() == Approx(8 * 8).epsilon(0.10));  // 8 req/s x 8 inputs
  CHECK(m["request_throughput"].get<double>() == Approx(8).epsilon(0.10));
  CHECK(m["total_inputs"].get<std::uint64_t>() == 8 * completed);
  CHECK(m["total_input_tokens"].get<std::uint64_t>() == 2048 * completed);  // the server's usage
  CHECK(m["input_token_throughput"].get<double>() == Approx(8 * 2048).epsilon(0.10));
  check_no_token_latencies(m);
  const auto late = sim.lateness();
  INFO("simulator iteration lateness p99 " << late.p99_ms << " ms");
  CHECK(late.p99_ms < 5);  // the model is the ground truth only while the simulator kept time
}

TEST_CASE("apis: a rerank check on /rerank sends a query with each document and is measured as embeddings") {
  // 4 documents of 100 tokens with a query of 100: 4 sequences of 200 tokens in one iteration.
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = pooling_check(sim, "rerank", "documents_per_request", 4, 100);
  spec["target"]["path"] = "/rerank";
  const json m = run_check(d, spec);
  INFO(m.dump());
  const llmsim::EngineParams e;
  const double model_e2el = e.decode_base_ms + 4 * e.decode_per_seq_ms + 800 * e.prefill_ms_per_token;
  const auto completed = m["completed"].get<std::uint64_t>();
  REQUIRE(completed >= 50);
  CHECK(m["failed"] == 0);
  CHECK(m["mean_e2el_ms"].get<double>() == Approx(model_e2el).epsilon(model_margin(0.10)));
  CHECK(m["total_inputs"].get<std::uint64_t>() == 4 * completed);
  CHECK(m["total_input_tokens"].get<std::uint64_t>() == 800 * completed);
  CHECK(m["input_throughput"].get<double>() == Approx(8 * 4).epsilon(0.10));
  check_no_token_latencies(m);
}

TEST_CASE(
    "apis: token-latency bounds on embeddings, foreign items and bad models are refused, naming the field, nothing "
    "stored") {
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = sim_job("http://127.0.0.1:9", "embeddings with a TTFT bound");
  spec["kind"] = "check";
  spec["target"]["api"] = "embeddings";
  spec["check"] = {{"rate_rps", 1}, {"duration_s", 2}};
  spec["slo"] = {{"ttft_ms", {{"p95", 800}}}};
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(r.body.find("/slo/ttft_ms") != std::string::npos);
  spec["slo"] = {{"e2el_ms", {{"p95", 100}}}};
  spec["workload"]["documents_per_request"] = 3;
  r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(r.body.find("/workload/documents_per_request") != std::string::npos);
  // A target's models: listed twice, or beside model.
  spec["target"]["api"] = "chat";
  spec["workload"].erase("documents_per_request");
  spec["target"].erase("model");
  spec["target"]["models"] = {{{"name", "a"}}, {{"name", "a"}}};
  r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(r.body.find("/target/models/1/name") != std::string::npos);
  spec["target"]["model"] = "sim-8b";
  spec["target"]["models"] = {{{"name", "a"}}};
  r = d.post("/v1/sweeps", spec.dump());
  CHECK(r.status == 400);
  CHECK(r.body.find("/target/models") != std::string::npos);
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());
  CHECK(d.get("/healthz").status == 200);
}

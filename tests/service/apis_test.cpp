// Target APIs beyond completions through capsweepd against capsweep-llmsim: the Responses API
// measured as chat is (the same simulator's capacity found over both), streamed and whole,
// its usage read from its own fields.

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

std::string base_url(const SimFixture& sim) {
  return loopback_url(sim.endpoint().port());
}

// Submits `spec`, waits (bounded) for the job to end and requires that it succeeded; its id
// and its last view.
std::pair<std::string, json> run_job(const Daemon& d, const json& spec, std::chrono::seconds limit) {
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body)["id"].get<std::string>();
  const json view = d.wait_for(id, job_ended, limit);
  INFO(view.dump(1));
  REQUIRE(view["status"] == "succeeded");
  return {id, view};
}

// Every step of a job read its tokens from the server's usage: 200 in and 64 out a request.
void check_usage_read(const Daemon& d, const std::string& id) {
  const json steps = d.get_json("/v1/sweeps/" + id + "/steps")["steps"];
  REQUIRE_FALSE(steps.empty());
  for (const auto& s : steps) {
    const json& m = s["summary"];
    const auto completed = m["completed"].get<std::uint64_t>();
    INFO("step " << s["index"] << ": " << m.dump());
    CHECK(completed > 0);
    CHECK(m["output_tokens_source"] == "usage");
    CHECK(m["total_output_tokens"].get<std::uint64_t>() == 64 * completed);
    CHECK(m["total_input_tokens"].get<std::uint64_t>() == 200 * completed);
  }
}

struct SweepOutcome {
  double max_rate = 0;
  bool generator_limited = false;
};

// A sweep of llmsim's default engine over `api`, on a simulator and a daemon of its own.
SweepOutcome sweep_over(const std::string& api) {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = sim_job(base_url(sim), "sweep over " + api);
  spec["target"]["api"] = api;
  spec["workload"]["seed"] = 42;
  spec["sweep"] = {{"steps", 4},
                   {"step_duration_s", 6},
                   {"warmup_s", 2},
                   {"baseline_requests", 5},
                   {"probe_requests", 256},
                   {"probe_concurrency", 256}};
  const auto [id, done] = run_job(d, spec, 240s);
  check_usage_read(d, id);
  SweepOutcome out;
  out.max_rate = done["result"]["max_slo_rate_rps"].get<double>();
  for (const auto& w : done["result"]["warnings"])
    out.generator_limited |= w.get<std::string>().find("generator-limited") != std::string::npos;
  const auto late = sim.lateness();
  INFO(api << ": simulator iteration lateness p99 " << late.p99_ms << " ms");
  CHECK(late.p99_ms < 5);  // the model is the ground truth only while the simulator kept time
  return out;
}

}  // namespace

TEST_CASE("apis: a Responses sweep finds the same max rate as the same workload over chat, within noise") {
  // llmsim's model (as capsweepd_test's full sweep): 64 sequences at 8 + 0.25 x 64 ms an
  // iteration plus their prefill, 64 tokens each.
  const llmsim::EngineParams e;
  const double n = e.max_num_seqs, o = 64, p = 200;
  const double model_rate =
      n / (o * (e.decode_base_ms + e.decode_per_seq_ms * n + e.prefill_ms_per_token * p * n / o) / 1000);
  const SweepOutcome chat = sweep_over("chat");
  const SweepOutcome responses = sweep_over("responses");
  INFO("model " << model_rate << " req/s; chat " << chat.max_rate << ", responses " << responses.max_rate);
  for (const auto* s : {&chat, &responses}) {
    CHECK(s->max_rate < 1.15 * model_rate);
    if (!s->generator_limited) CHECK(s->max_rate > 0.85 * model_rate);
  }
  if (!chat.generator_limited && !responses.generator_limited) {
    CHECK(std::abs(chat.max_rate - responses.max_rate) <= 0.2 * std::max(chat.max_rate, responses.max_rate));
  } else {
    WARN("a generator was limited: each answer is a lower bound only");
  }
}

TEST_CASE("apis: a whole (non-streamed) Responses answer is measured by its arrival, its usage read") {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 2;
  cfg.engine.decode_per_seq_ms = 0;
  cfg.engine.prefill_ms_per_token = 0;
  SimFixture sim(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = sim_job(base_url(sim), "whole responses");
  spec["kind"] = "check";
  spec["target"]["api"] = "responses";
  spec["target"]["stream"] = false;
  spec["check"] = {{"rate_rps", 10}, {"duration_s", 4}, {"warmup_s", 1}};
  const auto [id, done] = run_job(d, spec, 60s);
  check_usage_read(d, id);
  const json step = d.get_json("/v1/sweeps/" + id + "/steps")["steps"][0]["summary"];
  // 64 tokens at 2 ms an iteration: the answer arrives whole after ~128 ms; its first token is
  // its arrival, so TTFT is E2EL.
  CHECK(step["mean_e2el_ms"].get<double>() >= 128);
  CHECK(step["mean_ttft_ms"].get<double>() == Approx(step["mean_e2el_ms"].get<double>()).margin(1));
}

TEST_CASE("apis: a Responses target with quality checks is refused, naming the field, and nothing is stored") {
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const json side = {{"target", {{"base_url", "http://127.0.0.1:9"}, {"api", "responses"}, {"model", "sim-8b"}}}};
  const json spec = {
      {"name", "quality over responses"},
      {"kind", "regression"},
      {"baseline", side},
      {"candidate", side},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 100}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 16}}}}},
      {"arrival", {{"process", "poisson"}}},
      {"regression", {{"rate_rps", 2}, {"duration_s", 2}, {"warmup_s", 0}, {"rounds", 2}}},
      {"slo", {{"ttft_ms", {{"p95", 800}}}}},
      {"quality", {{"dataset", "ds-0123456789abcdef"}, {"checks", {"max_length"}}}}};
  const auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(r.body.find("/baseline/target/api") != std::string::npos);
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());
  CHECK(d.get("/healthz").status == 200);
}

TEST_CASE("apis: a check over two adapters gives each model's figures and verdict, each matching its adapter's cost") {
  // Two adapters on llmsim, each on an engine of its own costing only its decode_base_ms an
  // iteration: every token of "fast" comes 4 ms after the one before, of "slow" 16 ms after.
  llmsim::SimConfig cfg;
  cfg.adapters = {{"fast", 4.0, 0.0, 0.0}, {"slow", 16.0, 0.0, 0.0}};
  SimFixture sim(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = sim_job(base_url(sim), "two adapters");
  spec["kind"] = "check";
  spec["target"].erase("model");
  spec["target"]["models"] = {{{"name", "fast"}, {"weight", 3}}, {{"name", "slow"}, {"weight", 1}}};
  spec["workload"]["output_tokens"] = {{"dist", "fixed"}, {"value", 32}};
  spec["check"] = {{"rate_rps", 8}, {"duration_s", 8}, {"warmup_s", 1}};
  spec["slo"] = {{"itl_ms", {{"p50", 10}}}};  // fast meets it, slow cannot
  const auto [id, done] = run_job(d, spec, 90s);
  const json step = d.get_json("/v1/sweeps/" + id + "/steps")["steps"][0]["summary"];
  INFO(step.dump());
  REQUIRE(step["models"].size() == 2);
  const json& fast = step["models"][0];
  const json& slow = step["models"][1];
  CHECK(fast["model"] == "fast");
  CHECK(slow["model"] == "slow");
  const auto total = step["completed"].get<double>();
  REQUIRE(total >= 40);
  CHECK(fast["completed"].get<double>() + slow["completed"].get<double>() == total);
  CHECK(fast["completed"].get<double>() / total == Approx(0.75).margin(0.15));  // weights 3 : 1
  CHECK(fast["median_itl_ms"].get<double>() == Approx(4).epsilon(0.10));
  CHECK(slow["median_itl_ms"].get<double>() == Approx(16).epsilon(0.10));
  // 32 tokens a request, the first after at most one iteration's wait and one of its own.
  CHECK(fast["median_e2el_ms"].get<double>() == Approx(32 * 4).epsilon(0.10));
  CHECK(slow["median_e2el_ms"].get<double>() == Approx(32 * 16).epsilon(0.10));
  CHECK(fast["slo_verdict"] == "pass");
  CHECK(slow["slo_verdict"] == "fail");
  // steps.csv and the report give them too.
  const auto csv = d.get("/v1/sweeps/" + id + "/steps.csv");
  CHECK(csv.body.find("model1_name,model1_slo_verdict,model1_completed") != std::string::npos);
  CHECK(csv.body.find(",fast,pass,") != std::string::npos);
  CHECK(csv.body.find(",slow,fail,") != std::string::npos);
  const auto report = d.get("/v1/sweeps/" + id + "/report");
  CHECK(report.body.find("Models, one by one") != std::string::npos);
}

// The sweep manager's ways to end a job, run in-process against the fake endpoint: each stores
// one terminal status with its reason, counts it once, and leaves the stored steps as they are.

#include "sweep/manager.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <thread>

#include "llm/dataset.hpp"
#include "support/fake_endpoint.hpp"
#include "support/temp_db.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

json check_job(double rate, double seconds) {
  // Port 9 on loopback: nothing answers there, so calibration falls back at once and any
  // request that escaped the fake would fail loudly.
  return {
      {"name", "t"},
      {"kind", "check"},
      {"target", {{"base_url", "http://127.0.0.1:9"}, {"model", "m"}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 8}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 4}}}}},
      {"arrival", {{"process", "constant"}}},
      {"slo", {{"ttft_ms", {{"p95", 800}}}}},
      {"check", {{"rate_rps", rate}, {"duration_s", seconds}, {"warmup_s", 0}}}};
}

struct Harness {
  testing::TempDb db{"manager"};
  std::shared_ptr<testing::FakeStats> stats = std::make_shared<testing::FakeStats>();
  std::unique_ptr<sweep::SweepManager> manager;
  std::unique_ptr<store::Store> store;

  explicit Harness(testing::FakeModel model, std::function<void(sweep::ManagerOptions&)> tune = {}) {
    sweep::ManagerOptions o;
    o.db_path = db.path.string();
    o.poll = 50ms;
    o.endpoint = testing::fake_endpoint(std::move(model), stats);
    if (tune) tune(o);
    store = std::make_unique<store::Store>(o.db_path);
    manager = std::make_unique<sweep::SweepManager>(o);
  }
  ~Harness() { manager->stop(); }

  std::string queue(const json& spec, const std::string& status = "queued") {
    store::SweepRow row;
    row.id = "sw-" + std::to_string(++n);
    row.name = "t";
    row.kind = spec.value("kind", "sweep");
    row.target_key = "http://127.0.0.1:9";
    row.status = status;
    row.spec = spec;
    row.created_at = store::utc_now();
    store->insert_sweep(row);
    return row.id;
  }
  // Waits (bounded) until the sweep is no longer queued or running.
  store::SweepRow wait_end(const std::string& id) {
    for (int i = 0; i < 600; ++i) {
      auto row = store->sweep(id);
      if (row && row->status != "queued" && row->status != "running") return *row;
      std::this_thread::sleep_for(50ms);
    }
    FAIL("sweep " << id << " did not end within 30 s");
    return {};
  }
  int n = 0;
};

}  // namespace

TEST_CASE("manager: a check that runs to its end is stored as succeeded, with its step and result") {
  testing::FakeModel m;
  m.ttft = 5ms;
  Harness h(m);
  // 100 evenly spaced requests: enough for a p95 to be decided.
  const std::string id = h.queue(check_job(25, 4));
  h.manager->start();
  const auto row = h.wait_end(id);
  CHECK(row.status == "succeeded");
  CHECK(row.error.empty());
  CHECK(row.result.is_object());
  CHECK_FALSE(row.finished_at.empty());
  const auto steps = h.store->steps(id);
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].verdict == "pass");
  CHECK(steps[0].summary.value("measured", 0) == 100);
  CHECK(h.stats->requests == 100);
  CHECK(h.manager->stats().sweeps_finished == 1);
  CHECK(h.manager->stats().steps_run == 1);
  CHECK(h.manager->stats().requests_sent == 100);
}

TEST_CASE("manager: a stored spec that no longer parses fails the job and names why") {
  Harness h(testing::FakeModel{});
  json bad = check_job(20, 1);
  bad["check"]["rate_rps"] = -1;
  const std::string id = h.queue(bad);
  h.manager->start();
  const auto row = h.wait_end(id);
  CHECK(row.status == "failed");
  CHECK(row.error.find("stored spec is invalid") != std::string::npos);
  CHECK(row.result.is_null());
  CHECK(h.stats->requests == 0);
  CHECK(h.manager->stats().sweeps_finished == 1);
}

TEST_CASE("manager: a target removed from the allow-list since queueing fails the job unsent") {
  Harness h(testing::FakeModel{},
            [](sweep::ManagerOptions& o) { o.allow_host = [](std::string_view) { return false; }; });
  const std::string id = h.queue(check_job(20, 1));
  h.manager->start();
  const auto row = h.wait_end(id);
  CHECK(row.status == "failed");
  CHECK(row.error.find("no longer in the service's allow_targets") != std::string::npos);
  CHECK(h.stats->requests == 0);
}

TEST_CASE("manager: a cancel while a step runs ends the job cancelled and stores no partial step") {
  testing::FakeModel m;
  m.hang = true;
  Harness h(m);
  const std::string id = h.queue(check_job(20, 60));
  h.manager->start();
  for (int i = 0; i < 400 && h.stats->requests < 2; ++i) std::this_thread::sleep_for(10ms);
  REQUIRE(h.stats->requests >= 2);
  CHECK(h.manager->cancel(id) == sweep::CancelOutcome::stopping);
  const auto row = h.wait_end(id);
  CHECK(row.status == "cancelled");
  CHECK(row.error.find("cancelled by request") != std::string::npos);
  CHECK(h.store->steps(id).empty());
  CHECK(h.stats->cancel_calls >= 1);
  CHECK(h.manager->cancel(id) == sweep::CancelOutcome::already_finished);
}

TEST_CASE("manager: a queued job cancelled before a worker takes it never sends a request") {
  Harness h(testing::FakeModel{});
  const std::string id = h.queue(check_job(20, 1));
  CHECK(h.manager->cancel(id) == sweep::CancelOutcome::cancelled);
  h.manager->start();
  const auto row = h.wait_end(id);
  CHECK(row.status == "cancelled");
  CHECK(h.stats->requests == 0);
  CHECK(h.manager->cancel("sw-none") == sweep::CancelOutcome::not_found);
}

TEST_CASE("manager: a step begun twice without ending is not started a third time") {
  Harness h(testing::FakeModel{});
  const std::string id = h.queue(check_job(20, 1), "running");
  h.store->set_resumable(id, true);
  // Two earlier processes died inside step 0.
  CHECK(h.store->begin_step_attempt(id, 0) == 1);
  CHECK(h.store->begin_step_attempt(id, 0) == 2);
  h.manager->start();
  const auto row = h.wait_end(id);
  CHECK(row.status == "failed");
  CHECK(row.error.find("step 0 was started 2 times") != std::string::npos);
  CHECK(h.stats->requests == 0);
}

TEST_CASE("manager: a job past the service's total time limit fails during its step, naming the limit") {
  testing::FakeModel m;
  m.ttft = 5ms;
  Harness h(m, [](sweep::ManagerOptions& o) { o.max_total_sweep = 1s; });
  const std::string id = h.queue(check_job(20, 30));
  h.manager->start();
  const auto row = h.wait_end(id);
  CHECK(row.status == "failed");
  CHECK(row.error.find("max_total_sweep_s") != std::string::npos);
  CHECK(h.store->steps(id).empty());
  CHECK(h.stats->requests < 600);
}

TEST_CASE("manager: a regression job alternates its sides, asks the quality items and the judge, and judges both") {
  // The candidate (model "b") cuts every JSON answer short; the judge scores a whole answer 8,
  // a cut one 3.
  testing::FakeModel m;
  m.ttft = 2ms;
  m.itl = 1ms;
  m.answer = [](const std::string& body) -> std::vector<std::string> {
    const json req = json::parse(body);
    auto content = [](const std::string& text) {
      return json{{"choices", {{{"index", 0}, {"delta", {{"content", text}}}, {"finish_reason", "stop"}}}},
                  {"usage", {{"completion_tokens", 3}}}}
          .dump();
    };
    const std::string prompt = req["messages"][0]["content"];
    if (prompt.rfind("Judge:", 0) == 0) return {content(prompt.find("ok\"}") != std::string::npos ? "8" : "3")};
    return {content(req["model"] == "b" ? "{\"answer\": \"ok" : "{\"answer\": \"ok\"}"), "[DONE]"};
  };
  Harness h(m);
  std::string items;
  for (int i = 0; i < 30; ++i) {
    items += json{{"prompt", "question " + std::to_string(i)},
                  {"max_tokens", 8},
                  {"response_format", {{"type", "json_object"}}},
                  {"expect", {{"contains", "ok"}}}}
                 .dump() +
             "\n";
  }
  store::DatasetRow ds;
  ds.sha256 = llm::sha256_hex(items);
  ds.id = llm::dataset_id(ds.sha256);
  ds.format = "jsonl";
  ds.items = 30;
  ds.bytes = items.size();
  ds.created_at = store::utc_now();
  h.store->insert_dataset(ds, items);
  auto side = [](const std::string& port, const std::string& model) {
    return json{{"target", {{"base_url", "http://127.0.0.1:" + port}, {"api", "chat"}, {"model", model}}}};
  };
  // 12 human-labelled answers: whole ones scored 9, cut ones 2; the judge ranks them alike.
  json labelled = json::array();
  for (int i = 0; i < 12; ++i) {
    labelled.push_back({{"question", "q" + std::to_string(i)},
                        {"reference", "ok"},
                        {"answer", i % 2 ? "{\"answer\": \"ok\"}" : "{\"answer\": \"ok"},
                        {"human_score", i % 2 ? 9 : 2}});
  }
  const json spec{
      {"name", "regression"},
      {"kind", "regression"},
      {"baseline", side("9", "a")},
      {"candidate", side("10", "b")},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 8}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 4}}}}},
      {"arrival", {{"process", "constant"}}},
      {"slo", {{"ttft_ms", {{"p95", 800}}}}},
      {"regression", {{"rate_rps", 20}, {"duration_s", 1}, {"warmup_s", 0}, {"rounds", 2}, {"order", "shuffled"}}},
      {"quality", {{"dataset", {{"id", ds.id}, {"sha256", ds.sha256}}}, {"checks", {"json", "accuracy"}}}},
      {"judge",
       {{"target", {{"base_url", "http://127.0.0.1:11"}, {"api", "chat"}, {"model", "judge"}}},
        {"template", "Judge: {question} / {reference} / {answer}"},
        {"calibration", {{"items", labelled}, {"min_agreement", 0.5}}}}}};
  const std::string id = h.queue(spec);
  h.manager->start();
  const auto row = h.wait_end(id);
  INFO(row.error);
  REQUIRE(row.status == "succeeded");
  const auto steps = h.store->steps(id);
  REQUIRE(steps.size() == 6);  // 2 rounds of 2 runs, then one quality pass per side
  std::set<std::string> round_roles[2];
  for (int i = 0; i < 4; ++i) {
    CHECK(steps[i].kind == "run");
    round_roles[*steps[i].round].insert(steps[i].role);
  }
  CHECK(round_roles[0].size() == 2);  // each round runs both sides, in its own (seeded) order
  CHECK(round_roles[1].size() == 2);
  CHECK(steps[4].kind == "quality");
  CHECK(steps[4].role == "baseline");
  CHECK(steps[5].role == "candidate");
  const json& r = row.result;
  CHECK(r["verdict"] == "fail");
  CHECK(r["quality"]["json"]["baseline_rate"] == 1.0);
  CHECK(r["quality"]["json"]["candidate_rate"] == 0.0);
  CHECK(r["quality"]["json"]["verdict"] == "fail");
  CHECK(r["quality"]["accuracy"]["verdict"] == "pass");  // the broken answers still contain "ok"
  CHECK(r["judge"]["baseline_mean"] == 8.0);
  CHECK(r["judge"]["candidate_mean"] == 3.0);
  CHECK(r["judge"]["verdict"] == "fail");
  // The judge scored the labelled answers first, in the baseline's first pass, and agrees.
  CHECK(steps[4].summary["calibration_scores"].size() == 12);
  CHECK_FALSE(steps[5].summary.contains("calibration_scores"));
  CHECK(r["judge"]["calibration"]["scored"] == 12);
  CHECK(r["judge"]["calibration"]["spearman"] == 1.0);
  CHECK(r["judge"]["calibration"]["calibrated"] == true);
  CHECK(r["judge"]["gates"] == true);
  CHECK(r["conditions"]["order"].size() == 2);
  // The items are stored with their verdicts and the judge's score.
  const auto page = h.store->quality_page(id, std::nullopt, 100);
  REQUIRE(page.size() == 60);
  CHECK(page[0].second.score == 8.0);
  CHECK(page[30].second.score == 3.0);
  CHECK(page[30].second.verdicts["json"]["ok"] == false);
}

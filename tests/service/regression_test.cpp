// Regression jobs through capsweepd against two simulators on loopback: an identical pair
// passes, a slower candidate fails on the latencies it slowed, a candidate that breaks JSON
// fails on that rate alone, and bad specs get a 4xx naming the field with nothing stored.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"
#include "store/store.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

namespace fs = std::filesystem;

llmsim::SimConfig default_sim() {
  return {};  // 64 sequences, 8 + 0.25 x running ms an iteration
}

std::string base_of(const SimFixture& s) {
  return "http://127.0.0.1:" + std::to_string(s.endpoint().port());
}

// The committed rehearsal dataset: 100 json_object items, 30 json_schema, 30 tool calls, 40
// arithmetic questions with expected answers.
std::string rehearsal_dataset() {
  return read_text(fs::path(CAPSWEEP_SOURCE_DIR) / "config" / "datasets" / "quality-rehearsal.jsonl");
}

std::string upload(const Daemon& d, const std::string& body) {
  auto r = d.post("/v1/datasets?name=quality", body, {{"Content-Type", "application/x-ndjson"}});
  INFO(r.body);
  REQUIRE((r.status == 201 || r.status == 200));
  return json::parse(r.body)["id"].get<std::string>();
}

// A regression job of short runs: 4 rounds of 1 + 8 s at 10 req/s, chat API, 64 output tokens.
json regression_job(const std::string& a, const std::string& b, const std::string& name) {
  auto side = [](const std::string& base) {
    return json{{"target", {{"base_url", base}, {"api", "chat"}, {"model", "sim-8b"}}}};
  };
  return {{"kind", "regression"},
          {"name", name},
          {"baseline", side(a)},
          {"candidate", side(b)},
          {"workload",
           {{"prompt_tokens", {{"dist", "fixed"}, {"value", 200}}},
            {"output_tokens", {{"dist", "fixed"}, {"value", 64}}},
            {"seed", 3}}},
          {"arrival", {{"process", "poisson"}}},
          {"regression",
           {{"rate_rps", 10},
            {"duration_s", 8},
            {"warmup_s", 1},
            {"rounds", 4},
            {"thresholds", {{"tpot_p95_rise_pct", 10}}}}},
          {"slo", {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}}};
}

json run_job(const Daemon& d, const json& spec) {
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body)["id"];
  json v = d.wait_for(
      id, [](const json& s) { return s["status"] != "queued" && s["status"] != "running"; }, 400s);
  INFO(v.dump(2));
  REQUIRE(v["status"] == "succeeded");
  return v;
}

std::string verdicts_of(const json& result) {
  std::string out;
  for (const auto& [k, m] : result["metrics"].items()) {
    out += k + " " + m["verdict"].get<std::string>() + " " + m["change_pct"].dump() + " " + m["ci_pct"].dump() + "\n";
  }
  for (const auto& [k, q] : result["quality"].items()) {
    out += k + " " + q["verdict"].get<std::string>() + " " + q["baseline_rate"].dump() + " vs " +
           q["candidate_rate"].dump() + "\n";
  }
  return out;
}

llmsim::SimConfig slower(double factor) {
  llmsim::SimConfig c = default_sim();
  c.engine.decode_base_ms *= factor;
  c.engine.decode_per_seq_ms *= factor;
  return c;
}

}  // namespace

TEST_CASE("regression: A vs an identical A' passes every metric and every quality check") {
  SimFixture a(default_sim()), a2(default_sim());
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string ds = upload(d, rehearsal_dataset());
  json spec = regression_job(base_of(a), base_of(a2), "A vs A'");
  // Six 10-s rounds at 20 req/s: with four 8-s rounds at 10 req/s the TTFT p95's interval (80
  // requests a run) reached +-8% for identical servers. The simulator's TTFT is ~25 ms, so on
  // a loaded 2-core machine a few ms of scheduling jitter moves one run's p95 by 10%: the
  // per-round ratios of identical servers spread over 10-15% (seen in CI and under ASan), and
  // the rule rightly calls a 10% TTFT threshold unjudgeable there. 20% is one this
  // measurement can resolve; ITL and TPOT keep their tight thresholds.
  spec["regression"]["rounds"] = 6;
  spec["regression"]["duration_s"] = 10;
  spec["regression"]["rate_rps"] = 20;
  spec["regression"]["thresholds"]["ttft_p95_rise_pct"] = 20;
  spec["quality"] = {{"dataset", ds},
                     {"checks", {"json", "json_schema", "tool_calls", "max_length", "determinism", "accuracy"}}};
  const json v = run_job(d, spec);
  const json& r = v["result"];
  INFO(verdicts_of(r));
  INFO(r["warnings"].dump());
  // Identical servers pass. A run whose generator fell behind its schedule (on a busy 2-core
  // machine, now and then one run of twelve) makes a pass inconclusive, never a pass, and says
  // which run; every metric and check must still pass (below).
  CHECK(r["verdict"] == (r["generator_limited"] == true ? "inconclusive" : "pass"));
  REQUIRE(r["metrics"].size() == 4);  // goodput, TTFT p95, ITL p95 by default, TPOT p95 asked
  for (const auto& [k, m] : r["metrics"].items()) {
    CHECK(m["verdict"] == "pass");
    CHECK(m["test"] == "paired_t_log_ratio");
    CHECK(m["baseline_runs"].size() == 6);
    CHECK(m["candidate_runs"].size() == 6);
    CHECK(std::fabs(m["change_pct"].get<double>()) < 10);
  }
  REQUIRE(r["quality"].size() == 6);
  for (const auto& [k, q] : r["quality"].items()) {
    CHECK(q["verdict"] == "pass");
    CHECK(q["baseline_rate"] == 1.0);
    CHECK(q["candidate_rate"] == 1.0);
  }
  CHECK(r["quality"]["json"]["n"] == 100);
  CHECK(r["quality"]["accuracy"]["n"] == 40);
  CHECK(r["quality"]["determinism"]["cross_match_rate"] == 1.0);  // the same simulator answers alike
  // The runs alternate, baseline first, every round; each is a stored step with its role and round.
  const json steps = d.get_json("/v1/sweeps/" + v["id"].get<std::string>() + "/steps")["steps"];
  REQUIRE(steps.size() == 12 + 4);  // 6 rounds of 2 runs, then the quality steps
  for (int i = 0; i < 12; ++i) {
    CHECK(steps[i]["kind"] == "run");
    CHECK(steps[i]["role"] == (i % 2 == 0 ? "baseline" : "candidate"));
    CHECK(steps[i]["round"] == i / 2);
  }
  CHECK(steps[12]["kind"] == "quality");
  CHECK(steps[15]["role"] == "candidate");
  CHECK(steps[15]["round"] == 1);  // the repeat
  // Both sides of a round had the identical schedule: the same number of requests offered.
  for (int round = 0; round < 6; ++round) {
    CHECK(steps[2 * round]["summary"]["measured"] == steps[2 * round + 1]["summary"]["measured"]);
  }
  // quality.jsonl: every item of every pass, with its verdicts.
  auto export_ = d.get("/v1/sweeps/" + v["id"].get<std::string>() + "/quality.jsonl");
  REQUIRE(export_.status == 200);
  std::istringstream lines(export_.body);
  int n = 0, json_items = 0;
  std::set<std::string> roles;
  for (std::string line; std::getline(lines, line);) {
    const json item = json::parse(line);
    ++n;
    roles.insert(item["role"].get<std::string>());
    if (item["verdicts"].contains("json")) {
      ++json_items;
      CHECK(item["verdicts"]["json"]["ok"] == true);
      CHECK(json::parse(item["answer"].get<std::string>()).is_object());
    }
  }
  CHECK(n == 4 * 200);
  CHECK(json_items == 4 * 100);
  CHECK(roles == std::set<std::string>{"baseline", "candidate"});
}

TEST_CASE(
    "regression: sequential rounds: a 25%-slower B fails at the first look - A vs A' never fails, adding rounds") {
  SimFixture a(default_sim()), a2(default_sim()), b(slower(1.25));
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = regression_job(base_of(a), base_of(b), "sequential A vs B");
  spec["regression"]["rounds"] = 3;
  spec["regression"]["max_rounds"] = 8;
  spec["regression"]["duration_s"] = 6;
  spec["regression"]["rate_rps"] = 20;
  // TTFT at 20% as in the A vs A' job above: the simulator's ~25 ms TTFT moves 10% with a
  // few ms of scheduling jitter on a loaded machine.
  spec["regression"]["thresholds"]["ttft_p95_rise_pct"] = 20;
  const json slow = run_job(d, spec)["result"];
  INFO(verdicts_of(slow));
  CHECK(slow["verdict"] == "fail");
  CHECK(slow["metrics"]["p95_itl_ms"]["verdict"] == "fail");
  CHECK(slow["sequential"]["rounds_run"] == 3);
  CHECK(slow["sequential"]["alpha_per_look"].get<double>() == Approx(0.05 / 6));
  CHECK(slow["runs"].size() == 6);
  spec["candidate"]["target"]["base_url"] = base_of(a2);
  spec["name"] = "sequential A vs A'";
  const json v = run_job(d, spec);
  const json& same = v["result"];
  INFO(verdicts_of(same));
  INFO(same["sequential"].dump());
  const int n = same["sequential"]["rounds_run"].get<int>();
  WARN("A vs A': " << same["verdict"] << " after " << n << " rounds: " << same["sequential"]["stopped"]);
  CHECK(same["verdict"] != "fail");
  CHECK(n >= 3);
  CHECK(n <= 8);
  // Every round ran both sides, and a round past the third only after a look that left a
  // metric undecided: the job stops at the first look that settles it.
  const json steps = d.get_json("/v1/sweeps/" + v["id"].get<std::string>() + "/steps")["steps"];
  CHECK(steps.size() == 2 * static_cast<std::size_t>(n));
  if (n < 8 && same["generator_limited"] == false) {
    CHECK(same["verdict"] == "pass");
    CHECK(same["sequential"]["stopped"] == fmt::format("every metric decided after {} rounds", n));
  }
}

TEST_CASE("regression: a slower candidate that breaks JSON fails on ITL p95, TPOT and the JSON rate") {
  // 25% longer decode iterations and 10% of JSON answers broken: both are reported.
  llmsim::SimConfig b = slower(1.25);
  b.json_corrupt_rate = 0.1;
  SimFixture a(default_sim()), bad(b);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string ds = upload(d, rehearsal_dataset());
  json spec = regression_job(base_of(a), base_of(bad), "slower and broken");
  spec["quality"] = {{"dataset", ds}, {"checks", {"json", "max_length"}}};
  spec["baseline"]["target"]["labels"] = {{"runtime", "llmsim-1"}, {"quantization", "bf16"}};
  spec["candidate"]["target"]["labels"] = {{"runtime", "llmsim-2"}, {"quantization", "fp8"}, {"gpu", "sim"}};
  spec["basis"] = "runtime upgrade ticket 42";
  const json v = run_job(d, spec);
  const json& r = v["result"];
  INFO(verdicts_of(r));
  CHECK(r["verdict"] == "fail");
  // Which runtime each side ran is in the record.
  CHECK(r["baseline"]["labels"] == spec["baseline"]["target"]["labels"]);
  CHECK(r["candidate"]["labels"] == spec["candidate"]["target"]["labels"]);
  CHECK(r["basis"] == "runtime upgrade ticket 42");
  CHECK(r["metrics"]["p95_itl_ms"]["verdict"] == "fail");
  CHECK(r["metrics"]["p95_tpot_ms"]["verdict"] == "fail");
  // The model: every decode iteration 25% longer; ITL p95 follows it within a few points.
  const double itl = r["metrics"]["p95_itl_ms"]["change_pct"].get<double>();
  CHECK(itl > 18);
  CHECK(itl < 32);
  CHECK(r["quality"]["json"]["verdict"] == "fail");
  CHECK(r["quality"]["json"]["drop_pp"].get<double>() > 3);
  CHECK(r["quality"]["json"]["p_value"].get<double>() < 0.05);
  CHECK(r["quality"]["max_length"]["verdict"] == "pass");
  // The CLI's table and its exit code: 3 for a failed verdict.
  const std::string out = dir.path("compare.txt").string();
  const int code = shell_exit(fmt::format("'{}' --server http://127.0.0.1:{} compare {} > '{}'", CAPSWEEP_CLI_PATH,
                                          d.endpoint().port(), v["id"].get<std::string>(), out));
  CHECK(code == 3);
  const std::string table = read_text(out);
  INFO(table);
  CHECK(table.rfind("FAIL: candidate", 0) == 0);
  CHECK(table.find("p95_itl_ms") != std::string::npos);
  CHECK(table.find("json") != std::string::npos);
  CHECK(table.find("baseline labels: quantization=bf16 runtime=llmsim-1") != std::string::npos);
  CHECK(table.find("candidate labels: gpu=sim quantization=fp8 runtime=llmsim-2") != std::string::npos);
  CHECK(table.find("basis: runtime upgrade ticket 42") != std::string::npos);
  // The report: both sides per round and the verdict tables.
  auto page = d.get("/v1/sweeps/" + v["id"].get<std::string>() + "/report");
  REQUIRE(page.status == 200);
  CHECK(page.body.find("Regression verdict: <b>fail</b>") != std::string::npos);
  for (const char* id : {"regression-metrics", "regression-quality", "regression-rounds"}) {
    CHECK(page.body.find(std::string("id=\"") + id + "\"") != std::string::npos);
  }
  CHECK(count_of(page.body, "<svg class=\"chart\"") == 4);  // one per gated metric
}

TEST_CASE("regression: a candidate that breaks 10% of its JSON fails on that rate while its performance passes") {
  llmsim::SimConfig b = default_sim();
  b.json_corrupt_rate = 0.1;
  SimFixture a(default_sim()), bad(b);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string ds = upload(d, rehearsal_dataset());
  json spec = regression_job(base_of(a), base_of(bad), "broken JSON");
  spec["regression"]["thresholds"]["ttft_p95_rise_pct"] = 20;  // see A vs A': ~25 ms TTFTs jitter
  spec["quality"] = {{"dataset", ds}, {"checks", {"json", "tool_calls", "accuracy"}}};
  const json v = run_job(d, spec);
  const json& r = v["result"];
  INFO(verdicts_of(r));
  CHECK(r["verdict"] == "fail");
  for (const auto& [k, m] : r["metrics"].items()) CHECK(m["verdict"] == "pass");
  CHECK(r["quality"]["json"]["verdict"] == "fail");
  CHECK(r["quality"]["tool_calls"]["verdict"] == "pass");
  CHECK(r["quality"]["accuracy"]["verdict"] == "pass");
  // What broke is there to read: the failing items name the reason.
  auto export_ = d.get("/v1/sweeps/" + v["id"].get<std::string>() + "/quality.jsonl");
  std::istringstream lines(export_.body);
  int broken = 0;
  for (std::string line; std::getline(lines, line);) {
    const json item = json::parse(line);
    if (item["role"] == "candidate" && item["verdicts"].contains("json") && item["verdicts"]["json"]["ok"] == false) {
      ++broken;
      CHECK_FALSE(item["verdicts"]["json"]["reason"].get<std::string>().empty());
    }
  }
  CHECK(broken == static_cast<int>(std::lround(100 * r["quality"]["json"]["drop_pp"].get<double>() / 100)));
}

TEST_CASE("regression: bad specs get a 4xx naming the field - nothing is stored - it keeps serving") {
  TempDir dir;
  const fs::path db = dir.path("capsweep.db");
  {
    // A succeeded sweep to take a rate from, and one that found none.
    store::Store s(db.string());
    store::SweepRow row;
    row.id = "sw-00000000000000aa";
    row.kind = "sweep";
    row.target_key = "http://127.0.0.1:9";
    row.status = "queued";
    row.spec = json::object();
    s.insert_sweep(row);
    s.transition(row.id, "queued", "running");
    s.finish_sweep(row.id, "succeeded", {{"kind", "sweep"}, {"max_slo_rate_rps", 6.5}}, "");
    row.id = "sw-00000000000000bb";
    s.insert_sweep(row);
    s.transition(row.id, "queued", "running");
    s.finish_sweep(row.id, "succeeded", {{"kind", "sweep"}, {"max_slo_rate_rps", nullptr}}, "");
  }
  Daemon d(db, dir.path("capsweepd.log"));
  const std::string plain = upload(d, "{\"prompt\": \"one two\"}\n{\"prompt\": \"three four\"}\n");
  const std::string rich = upload(d, rehearsal_dataset());
  const std::string a = "http://127.0.0.1:18001", b = "http://127.0.0.1:18002";
  struct Case {
    std::string what;
    std::function<void(json&)> edit;
    int status;
    std::string field;
  };
  const std::vector<Case> cases{
      {"no candidate", [](json& j) { j.erase("candidate"); }, 400, "/candidate"},
      {"a top-level target too", [&](json& j) { j["target"] = j["baseline"]["target"]; }, 400, "/target"},
      {"a candidate outside the allow-list",
       [](json& j) { j["candidate"]["target"]["base_url"] = "http://10.1.2.3:8000"; }, 403,
       "/candidate/target/base_url"},
      {"no rate", [](json& j) { j["regression"].erase("rate_rps"); }, 400, "/regression/rate_rps"},
      {"a rate and a sweep", [](json& j) { j["regression"]["from_sweep"] = "sw-00000000000000aa"; }, 400,
       "/regression/rate_rps"},
      {"an unknown sweep",
       [](json& j) {
         j["regression"].erase("rate_rps");
         j["regression"]["from_sweep"] = "sw-00000000000000cc";
       },
       409, "/regression/from_sweep"},
      {"a sweep without a rate",
       [](json& j) {
         j["regression"].erase("rate_rps");
         j["regression"]["from_sweep"] = "sw-00000000000000bb";
       },
       409, "/regression/from_sweep"},
      {"one round", [](json& j) { j["regression"]["rounds"] = 1; }, 400, "/regression/rounds"},
      {"an unknown threshold",
       [](json& j) {
         j["regression"]["thresholds"] = {{"latency_pct", 5}};
       },
       400, "/regression/thresholds"},
      {"more time than the service gives a job",
       [](json& j) {
         j["regression"]["rounds"] = 50;
         j["regression"]["duration_s"] = 3000;
       },
       400, "/regression/rounds"},
      {"max_rounds below rounds", [](json& j) { j["regression"]["max_rounds"] = 3; }, 400, "/regression/max_rounds"},
      {"sequential rounds past the time the service gives a job",
       [](json& j) {
         j["regression"]["max_rounds"] = 50;
         j["regression"]["duration_s"] = 3000;
       },
       400, "/regression/max_rounds"},
      {"a sweep block", [](json& j) { j["sweep"] = json::object(); }, 400, "/sweep"},
      {"an unknown dataset",
       [](json& j) {
         j["quality"] = {{"dataset", "ds-0123456789abcdef"}, {"checks", {"json"}}};
       },
       400, "/quality/dataset"},
      {"a dataset without response_format items",
       [&](json& j) {
         j["quality"] = {{"dataset", plain}, {"checks", {"max_length", "json"}}};
       },
       400, "/quality/checks/1"},
      {"a dataset without expect items",
       [&](json& j) {
         j["quality"] = {{"dataset", plain}, {"checks", {"accuracy"}}};
       },
       400, "/quality/checks/0"},
      {"an unknown check",
       [&](json& j) {
         j["quality"] = {{"dataset", rich}, {"checks", {"style"}}};
       },
       400, "/quality/checks/0"},
      {"tool calls on the completions API",
       [&](json& j) {
         j["baseline"]["target"]["api"] = "completions";
         j["quality"] = {{"dataset", rich}, {"checks", {"tool_calls"}}};
       },
       400, "/baseline/target/api"},
      {"a judge without a quality block",
       [&](json& j) {
         j["judge"] = {{"target", j["baseline"]["target"]}, {"template", "{answer}"}};
       },
       400, "/judge"},
      {"a judge template without {answer}",
       [&](json& j) {
         j["quality"] = {{"dataset", rich}, {"checks", {"accuracy"}}};
         j["judge"] = {{"target", j["baseline"]["target"]}, {"template", "rate this"}};
       },
       400, "/judge/template"},
      {"a human score off the judge's scale in its calibration set",
       [&](json& j) {
         j["quality"] = {{"dataset", rich}, {"checks", {"accuracy"}}};
         json items = json::array();
         for (int i = 0; i < 10; ++i)
           items.push_back({{"question", "q"}, {"reference", "r"}, {"answer", "a"}, {"human_score", i == 6 ? 8 : 3}});
         j["judge"] = {{"target", j["baseline"]["target"]},
                       {"template", "{answer}"},
                       {"scale", 5},
                       {"calibration", {{"items", items}}}};
       },
       400, "/judge/calibration/items/6/human_score"},
      {"burstiness that poisson arrivals would not send",
       [](json& j) {
         j["arrival"] = {{"process", "poisson"}, {"burstiness", 0.5}};
       },
       400, "/arrival/burstiness"},
      {"a regression block in a check",
       [](json& j) {
         j["kind"] = "check";
         j["target"] = j["baseline"]["target"];
         j.erase("baseline");
         j.erase("candidate");
         j["check"] = {{"rate_rps", 1}, {"duration_s", 5}};
       },
       400, "/regression"},
  };
  for (const auto& c : cases) {
    json spec = regression_job(a, b, c.what);
    c.edit(spec);
    auto r = d.post("/v1/sweeps", spec.dump());
    INFO(c.what << ": " << r.body);
    CHECK(r.status == c.status);
    const json e = json::parse(r.body, nullptr, false);
    CHECK(e["error"]["field"].get<std::string>().rfind(c.field, 0) == 0);
  }
  // Nothing was stored but the two sweeps planted; the service still serves.
  CHECK(d.get_json("/v1/sweeps")["sweeps"].size() == 2);
  CHECK(d.get("/healthz").status == 200);
  // from_sweep takes the sweep's max SLO rate into the stored spec.
  json from = regression_job(a, b, "from a sweep");
  from["regression"].erase("rate_rps");
  from["regression"]["from_sweep"] = "sw-00000000000000aa";
  from["candidate"]["target"]["headers"] = {{"Authorization", "Bearer candidate-s3cret"}};
  auto ok = d.post("/v1/sweeps", from.dump());
  INFO(ok.body);
  REQUIRE(ok.status == 201);
  const json stored = json::parse(ok.body);
  CHECK(stored["kind"] == "regression");
  CHECK(stored["spec"]["regression"]["rate_rps"] == 6.5);
  CHECK(stored["spec"]["regression"]["from_sweep"] == "sw-00000000000000aa");
  CHECK(stored["spec"]["regression"]["thresholds"]["goodput_drop_pct"] == 5);
  const std::string id = stored["id"];
  // Every target's header values are write-only.
  CHECK(ok.body.find("candidate-s3cret") == std::string::npos);
  CHECK(d.get("/v1/sweeps/" + id).body.find("candidate-s3cret") == std::string::npos);
  CHECK(stored["spec"]["candidate"]["target"]["headers"]["Authorization"] == "(secret)");
  CHECK(d.post("/v1/sweeps/" + id + "/cancel", "").status == 202);
  // A dataset a queued or running regression names cannot be deleted.
  json with_quality = regression_job("http://127.0.0.1:9", "http://127.0.0.1:10", "holds a dataset");
  with_quality["quality"] = {{"dataset", rich}, {"checks", {"json"}}};
  auto held = d.post("/v1/sweeps", with_quality.dump());
  REQUIRE(held.status == 201);
  CHECK(json::parse(held.body)["spec"]["quality"]["dataset"]["sha256"].get<std::string>().size() == 64);
  CHECK(d.del("/v1/datasets/" + rich).status == 409);
  // A quality pass larger than the service allows is refused until max_items bounds it.
  {
    std::ofstream(dir.path("small.json")) << R"({"limits": {"max_quality_items": 100}})";
    Daemon small(dir.path("small.db"), dir.path("small.log"), {"--config", dir.path("small.json").string()});
    const std::string id200 = upload(small, rehearsal_dataset());
    json big = regression_job("http://127.0.0.1:9", "http://127.0.0.1:10", "too many items");
    big["quality"] = {{"dataset", id200}, {"checks", {"json"}}};
    auto refused = small.post("/v1/sweeps", big.dump());
    INFO(refused.body);
    CHECK(refused.status == 400);
    CHECK(json::parse(refused.body)["error"]["field"] == "/quality/max_items");
    big["quality"]["max_items"] = 100;
    CHECK(small.post("/v1/sweeps", big.dump()).status == 201);
  }
}

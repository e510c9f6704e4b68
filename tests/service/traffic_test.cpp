// Traffic shapes against capsweep-llmsim through capsweepd's API: a reasoning model whose
// first visible token comes after its reasoning. The figures checked are the simulator's
// model, predicted exactly: with a fixed iteration time d and R reasoning tokens, the first
// visible token comes R iterations after the first token, so TTFO - TTFT = R x d.

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

// llmsim's count of streams that ended before their last token (its client went away).
double sim_aborted(const SimFixture& sim) {
  const auto r = http_request(sim.endpoint(), "GET", "/metrics");
  std::istringstream lines(r.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("llmsim:request_aborted_total", 0) == 0) return std::stod(line.substr(line.rfind(' ') + 1));
  }
  return -1;
}

// A check job of `rate` req/s for `duration_s` against the simulator, giving up as `abandon` says.
json abandon_check(const SimFixture& sim, double rate, double duration_s, const json& abandon) {
  const std::string url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  return {{"name", "impatient users"},
          {"kind", "check"},
          {"target", {{"base_url", url}, {"api", "completions"}, {"model", "sim-8b"}}},
          {"workload",
           {{"prompt_tokens", {{"dist", "fixed"}, {"value", 200}}},
            {"output_tokens", {{"dist", "fixed"}, {"value", 64}}},
            {"seed", 5},
            {"abandon", abandon}}},
          {"arrival", {{"process", "poisson"}}},
          {"check", {{"rate_rps", rate}, {"duration_s", duration_s}, {"warmup_s", 1}}},
          {"slo", {{"ttft_ms", {{"p95", 2000}}}, {"max_error_rate", 0.01}}}};
}

// The cells of a CSV line (no quoting: capsweep's CSVs have none in these columns).
std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream cs(line);
  for (std::string cell; std::getline(cs, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// The rows of a job's requests.csv whose outcome is `outcome`.
std::size_t rows_with(const Daemon& d, const std::string& id, const std::string& outcome) {
  const auto csv = d.get("/v1/sweeps/" + id + "/requests.csv");
  std::istringstream lines(csv.body);
  std::string line;
  std::getline(lines, line);  // header
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    const auto cells = csv_cells(line);
    if (cells.size() > 11 && cells[11] == outcome) ++n;
  }
  return n;
}

// A simulator of 2 ms an iteration, whatever the batch, and no prefill time: a 20-token answer
// in about 40 ms, so short steps hold many requests.
llmsim::SimConfig quick_sim() {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 2;
  cfg.engine.decode_per_seq_ms = 0;
  cfg.engine.prefill_ms_per_token = 0;
  return cfg;
}

// Submits `spec`, waits (bounded) for the job to end and requires that it succeeded; its id
// and its last view.
std::pair<std::string, json> run_job(const Daemon& d, const json& spec) {
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body)["id"].get<std::string>();
  const json view = d.wait_for(id, job_ended, 60s);
  INFO(view.dump(1));
  REQUIRE(view["status"] == "succeeded");
  return {id, view};
}

// Waits (bounded) until the simulator has noticed `expected` aborted streams; its last count.
double await_aborted(const SimFixture& sim, double expected) {
  double seen = sim_aborted(sim);
  for (int i = 0; i < 100 && seen < expected; ++i) {
    std::this_thread::sleep_for(100ms);
    seen = sim_aborted(sim);
  }
  return seen;
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
  const json spec = {{"name", "reasoning check"},
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
  const auto [id, view] = run_job(d, spec);
  INFO(view.dump(1));
  CHECK(view["result"]["verdict"] == "fail");
  const json steps = d.get_json("/v1/sweeps/" + id + "/steps");
  REQUIRE(steps["steps"].size() == 1);
  const json& s = steps["steps"][0]["summary"];
  const auto completed = s["completed"].get<std::uint64_t>();
  REQUIRE(completed > 50);
  CHECK(s["requests_with_reasoning"] == completed);
  CHECK(s["total_reasoning_tokens"] == 20 * completed);  // usage's completion_tokens_details
  CHECK(s["total_visible_tokens"] == 44 * completed);    // max_tokens bounds both
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

TEST_CASE("traffic: bad ttfo_ms bounds and abandon settings get a 400 naming the field, and nothing is stored") {
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
  spec["slo"].erase("ttfo_ms");
  for (const auto& [abandon, field] : std::vector<std::pair<json, std::string>>{
           {{{"no_first_token_s", -1}}, "/workload/abandon/no_first_token_s"},
           {{{"after_tokens", 0}}, "/workload/abandon/after_tokens"},
           {{{"no_first_token_s", 1}, {"fraction", 0.5}}, "/workload/abandon/fraction"},
           {json::object(), "/workload/abandon"}}) {
    spec["workload"]["abandon"] = abandon;
    r = d.post("/v1/sweeps", spec.dump());
    INFO(abandon.dump() << " " << r.body);
    CHECK(r.status == 400);
    CHECK(json::parse(r.body)["error"].value("field", "").rfind(field, 0) == 0);
  }
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());  // nothing stored
  CHECK(d.get("/healthz").status == 200);             // and it keeps serving
}

TEST_CASE("traffic: users who wait too long for a first token give up, and the server sees every one go") {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 10;
  cfg.engine.decode_per_seq_ms = 0;
  // 200 prompt tokens: the first token after ~300 ms; prefill alone holds ~3.3 req/s, so 1.5
  // req/s leaves the server no backlog at the end (it sees every disconnect within seconds).
  cfg.engine.prefill_ms_per_token = 1.5;
  SimFixture sim(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const auto [id, view] = run_job(d, abandon_check(sim, 1.5, 8, {{"no_first_token_s", 0.1}}));
  INFO(view.dump(1));
  const json s = d.get_json("/v1/sweeps/" + id + "/steps")["steps"][0]["summary"];
  const auto measured = s["measured"].get<std::uint64_t>();
  CHECK(measured > 5);
  CHECK(s["abandoned"] == measured);  // nobody waits 300 ms when patient for 100
  CHECK(s["completed"] == 0);
  CHECK(s["error_rate"] == 0.0);  // giving up is not an error
  CHECK(s["errors"].empty());
  // Waits of 100 ms say nothing against a 2-s TTFT bound, and no request completed: the
  // verdict cannot be a pass.
  CHECK(view["result"]["verdict"] != "pass");
  const std::size_t gone = rows_with(d, id, "abandoned");
  CHECK(gone >= measured);
  CHECK(await_aborted(sim, static_cast<double>(gone)) == static_cast<double>(gone));
}

TEST_CASE("traffic: a fraction of the streams closed after k tokens: their own outcome, seen by the server") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const auto [id, view] = run_job(d, abandon_check(sim, 10, 6, {{"after_tokens", 5}, {"fraction", 0.5}}));
  INFO(view.dump(1));
  const json s = d.get_json("/v1/sweeps/" + id + "/steps")["steps"][0]["summary"];
  const auto measured = s["measured"].get<std::uint64_t>();
  const auto abandoned = s["abandoned"].get<std::uint64_t>();
  REQUIRE(measured > 40);
  CHECK(s["completed"].get<std::uint64_t>() + abandoned == measured);
  CHECK(static_cast<double>(abandoned) / static_cast<double>(measured) == Approx(0.5).margin(0.2));
  CHECK(s["error_rate"] == 0.0);
  CHECK(s["request_goodput"].get<double>() > 0);
  const std::size_t gone = rows_with(d, id, "abandoned");
  CHECK(gone >= abandoned);
  CHECK(await_aborted(sim, static_cast<double>(gone)) == static_cast<double>(gone));
}

TEST_CASE(
    "traffic: a warm prefix cache lowers TTFT by the prefill it skips, and the step reports the server's hit rate") {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 10;  // every iteration 10 ms plus 0.1 ms per prompt token prefilled
  cfg.engine.decode_per_seq_ms = 0;
  cfg.engine.prefill_ms_per_token = 0.1;
  cfg.engine.prefix_cache_blocks = 100'000;
  SimFixture sim(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  // One user at a time, 40 requests over 40 prefixes of 800 tokens (50 blocks of 16): cold,
  // every prefix is new to the server; warm, each was sent once before the step.
  const auto spec = [&](const char* cache) {
    return json{
        {"name", std::string("prefix cache ") + cache},
        {"kind", "check"},
        {"target", {{"base_url", url}, {"api", "completions"}, {"model", "sim-8b"}, {"metrics_url", url + "/metrics"}}},
        {"workload",
         {{"prompt_tokens", {{"dist", "fixed"}, {"value", 1000}}},
          {"output_tokens", {{"dist", "fixed"}, {"value", 4}}},
          {"seed", 7},
          {"prefix", {{"tokens", 800}, {"count", 40}, {"cache", cache}}}}},
        {"check", {{"concurrency", 1}, {"requests", 40}, {"duration_s", 60}}},
        {"slo", {{"ttft_ms", {{"p95", 2000}}}, {"max_error_rate", 0.01}}}};
  };
  json bad = spec("warm");
  bad["workload"]["prefix"]["count"] = 0;
  const auto refused = d.post("/v1/sweeps", bad.dump());
  CHECK(refused.status == 400);
  CHECK(json::parse(refused.body)["error"].value("field", "") == "/workload/prefix/count");

  const auto [cold_id, cold_view] = run_job(d, spec("cold"));
  const auto [warm_id, warm_view] = run_job(d, spec("warm"));
  const json cold = d.get_json("/v1/sweeps/" + cold_id + "/steps")["steps"][0]["summary"];
  const json warm = d.get_json("/v1/sweeps/" + warm_id + "/steps")["steps"][0]["summary"];
  INFO(cold.dump(1) << "\n" << warm.dump(1));
  REQUIRE(cold["completed"] == 40);
  REQUIRE(warm["completed"] == 40);
  CHECK(cold["prefix_cache"]["state"] == "cold");
  CHECK(warm["prefix_cache"]["state"] == "warm");
  CHECK(warm["prefix_cache"]["warm_requests"] == 40);
  CHECK(warm["prefix_cache"]["warm_failed"] == 0);
  // The server's own count: nothing hit cold (the salted prompts are new to it); warm, the 800
  // prefix tokens of every 1000-token prompt.
  CHECK(cold["prefix_cache"]["hit_rate"].get<double>() == Approx(0).margin(0.01));
  CHECK(warm["prefix_cache"]["hit_rate"].get<double>() == Approx(0.8).margin(0.01));
  // The model's prediction: a warm request prefills 200 tokens instead of 1000, so its first
  // token comes 800 x 0.1 ms = 80 ms sooner.
  const double skipped_ms = cold["mean_ttft_ms"].get<double>() - warm["mean_ttft_ms"].get<double>();
  CHECK(skipped_ms == Approx(80).margin(8));
  CHECK(cold["median_ttft_ms"].get<double>() - warm["median_ttft_ms"].get<double>() == Approx(80).margin(8));
}

TEST_CASE("traffic: a trace replays its own arrivals, scaled and looped, and its shared blocks hit the prefix cache") {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 10;
  cfg.engine.decode_per_seq_ms = 0;
  cfg.engine.prefill_ms_per_token = 0.05;  // a request ends ~50 ms after it came: none overlaps the next
  cfg.engine.prefix_cache_blocks = 100'000;
  SimFixture sim(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  const std::map<std::string, std::string> ndjson{{"Content-Type", "application/x-ndjson"}};
  // 20 rows 300 ms apart, each of 3 blocks of 64 tokens: two every row shares, one its own.
  std::string trace;
  for (int k = 0; k < 20; ++k) {
    trace += json{{"timestamp", 300 * k}, {"input_length", 192}, {"output_length", 4}, {"hash_ids", {0, 1, 100 + k}}}
                 .dump() +
             "\n";
  }
  const auto bad =
      d.post("/v1/datasets?format=trace", trace + R"({"timestamp": 1, "input_length": 5, "output_length": 5})", ndjson);
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body)["error"].value("field", "") == "line 21: /timestamp");
  const auto up = d.post("/v1/datasets?format=trace&name=twenty", trace, ndjson);
  INFO(up.body);
  REQUIRE(up.status == 201);
  const std::string trace_id = json::parse(up.body)["id"];
  const auto jsonl = d.post("/v1/datasets", json{{"prompt", "a b c"}}.dump() + "\n", ndjson);
  REQUIRE(jsonl.status == 201);

  json spec = {
      {"name", "trace replay"},
      {"kind", "check"},
      {"target", {{"base_url", url}, {"api", "completions"}, {"model", "sim-8b"}, {"metrics_url", url + "/metrics"}}},
      {"workload", {{"dataset", {{"id", trace_id}, {"block_tokens", 64}}}, {"prefix", {{"cache", "cold"}}}}},
      {"arrival", {{"process", "trace"}, {"speed", 2}, {"loop", true}}},
      {"check", {{"duration_s", 4.5}}},
      {"slo", {{"ttft_ms", {{"p95", 2000}}}, {"max_error_rate", 0.01}}}};
  // A trace is replayed as a trace, and only a trace is.
  json wrong = spec;
  wrong["workload"]["dataset"]["id"] = json::parse(jsonl.body)["id"];
  auto r = d.post("/v1/sweeps", wrong.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/workload/dataset/id");
  wrong = spec;
  wrong["arrival"] = {{"process", "poisson"}};
  wrong["check"]["rate_rps"] = 5;
  r = d.post("/v1/sweeps", wrong.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/arrival/process");

  const auto [id, view] = run_job(d, spec);
  INFO(view.dump(1));
  const json& cond = view["result"]["conditions"];
  CHECK(cond["arrival"] == "trace");
  CHECK(cond["rate_rps"].is_null());
  CHECK(cond["trace"]["speed"] == 2);
  // At speed 2 the rows come 150 ms apart; the trace (span 5.7 s, mean gap 0.3 s) loops every
  // 6 s / 2 = 3 s: 20 rows, then rows 0-9 again before 4.5 s.
  const auto csv = d.get("/v1/sweeps/" + id + "/requests.csv");
  std::istringstream lines(csv.body);
  std::string line;
  std::getline(lines, line);  // header
  std::vector<double> scheduled;
  std::size_t ok = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::istringstream cs(line);
    for (std::string cell; std::getline(cs, cell, ',');) cells.push_back(cell);
    REQUIRE(cells.size() > 11);
    scheduled.push_back(std::stod(cells[2]));
    CHECK(cells[8] == "192");  // the server counted the row's input_length
    ok += cells[11] == "ok";
  }
  REQUIRE(scheduled.size() == 30);
  CHECK(ok == 30);
  std::sort(scheduled.begin(), scheduled.end());
  for (std::size_t k = 0; k < 30; ++k) {
    const double expected = k < 20 ? 150.0 * static_cast<double>(k) : 3000.0 + 150.0 * static_cast<double>(k - 20);
    CHECK(scheduled[k] == Approx(expected).margin(0.001));
  }
  const json s = d.get_json("/v1/sweeps/" + id + "/steps")["steps"][0]["summary"];
  CHECK(s["offered_rate_rps"].get<double>() == Approx(30 / 4.5));
  // The server's count, as its model predicts: the first request hits nothing; rows 1-19 hit
  // the two shared blocks (128 tokens); the loop's 10 repeats find all 192 cached and prefill
  // the one token every request computes: (19 x 128 + 10 x 191) / (30 x 192).
  CHECK(s["prefix_cache"]["state"] == "cold");
  CHECK(s["prefix_cache"]["hit_rate"].get<double>() == Approx((19.0 * 128 + 10 * 191) / (30 * 192)).margin(0.01));
}

namespace {

// A check of 5-turn sessions arriving at `rate` sessions/s: P = 30 prompt tokens per user
// turn, O = 20 answer tokens, 100 ms of think time, the history as `history` says.
json session_check(const std::string& url, const std::string& history, double rate) {
  return {
      {"name", "chat sessions"},
      {"kind", "check"},
      {"target", {{"base_url", url}, {"api", "chat"}, {"model", "sim-8b"}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 30}}},
        {"output_tokens", {{"dist", "fixed"}, {"value", 20}}},
        {"seed", 9},
        {"sessions", {{"turns", 5}, {"think_time_ms", {{"dist", "fixed"}, {"value", 100}}}, {"history", history}}}}},
      {"arrival", {{"process", "poisson"}}},
      {"check", {{"rate_rps", rate}, {"duration_s", 5}, {"warmup_s", 1}}},
      {"slo", {{"ttft_ms", {{"p95", 2000}}}, {"max_error_rate", 0.01}}}};
}

}  // namespace

TEST_CASE("traffic: a session's turn k sends the whole history: k x P + (k - 1) x O tokens, as the server counts") {
  SimFixture sim(quick_sim());
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  for (const std::string history : {"server", "reference"}) {
    INFO("history " << history);
    const auto [id, view] = run_job(d, session_check(url, history, 3));
    const json& cond = view["result"]["conditions"];
    CHECK(cond["sessions"]["history"] == history);
    const json s = d.get_json("/v1/sweeps/" + id + "/steps")["steps"][0]["summary"];
    INFO(s.dump(1));
    // Sessions arrive at 3/s for 6 s (warm-up included); each asks 5 turns.
    const json& sessions = s["sessions"];
    CHECK(sessions["history"] == history);
    CHECK(sessions["started"].get<double>() > 8);
    CHECK(sessions["broken"] == 0);
    CHECK(sessions["completed"].get<std::uint64_t>() + sessions["cut"].get<std::uint64_t>() == sessions["started"]);
    CHECK(sessions["completed"].get<std::uint64_t>() > 0);
    // The requests offered are the sessions' turns: several per session.
    CHECK(s["offered_rate_rps"].get<double>() > 2 * sessions["offered_rate_sps"].get<double>());
    // The model: turn k's prompt is k user turns of 30 and k - 1 answers of 20.
    REQUIRE(s["turns"].size() == 5);
    for (std::size_t k = 1; k <= 5; ++k) {
      const json& t = s["turns"][k - 1];
      const double expected = 30.0 * static_cast<double>(k) + 20.0 * static_cast<double>(k - 1);
      CHECK(t["turn"] == k);
      CHECK(t["completed"].get<std::uint64_t>() > 0);
      CHECK(t["mean_prompt_tokens"].get<double>() == Approx(expected));
      CHECK(t["max_prompt_tokens"].get<double>() == Approx(expected));
    }
    // Every request of requests.csv carries its turn, and the server's count of its prompt.
    const auto csv = d.get("/v1/sweeps/" + id + "/requests.csv");
    std::istringstream lines(csv.body);
    std::string line;
    std::getline(lines, line);
    REQUIRE(csv_cells(line).size() == 16);
    REQUIRE(csv_cells(line)[14] == "turn");
    std::map<int, std::size_t> per_turn;
    while (std::getline(lines, line)) {
      const auto cells = csv_cells(line);
      REQUIRE(cells.size() == 16);
      REQUIRE_FALSE(cells[14].empty());
      const int turn = std::stoi(cells[14]);
      if (cells[11] != "ok") continue;
      ++per_turn[turn];
      CHECK(std::stoi(cells[8]) == 30 * turn + 20 * (turn - 1));
    }
    REQUIRE(per_turn.size() == 5);
    CHECK(per_turn[1] >= per_turn[5]);  // sessions cut at the step's end lose their last turns
    // steps.csv gives each turn's figures; the report a table of them.
    const auto steps_csv = d.get("/v1/sweeps/" + id + "/steps.csv");
    std::istringstream sl(steps_csv.body);
    std::string header, row;
    std::getline(sl, header);
    std::getline(sl, row);
    const auto names = csv_cells(header), values = csv_cells(row);
    REQUIRE(names.size() == values.size());
    const auto col = std::find(names.begin(), names.end(), "turn5_mean_prompt_tokens");
    REQUIRE(col != names.end());
    CHECK(std::stod(values[static_cast<std::size_t>(col - names.begin())]) == Approx(230));
    const auto report = d.get("/v1/sweeps/" + id + "/report");
    CHECK(report.body.find("id=\"turns\"") != std::string::npos);
    CHECK(report.body.find("sessions/s") != std::string::npos);
  }
}

namespace {

// The request bodies' sizes llmsim received, by its /sim/spans.
std::vector<std::size_t> body_sizes(const SimFixture& sim) {
  std::vector<std::size_t> out;
  const json spans = json::parse(http_request(sim.endpoint(), "GET", "/sim/spans").body);
  for (const auto& span : spans["spans"]) {
    out.push_back(span["body_bytes"].get<std::size_t>());
  }
  return out;
}

}  // namespace

TEST_CASE("traffic: server_state sessions send bodies of one size, client history growing ones, the context alike") {
  std::map<std::string, double> spread;  // largest over smallest body, by history
  for (const std::string history : {"server", "server_state"}) {
    INFO("history " << history);
    SimFixture sim(quick_sim());
    TempDir dir;
    Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
    json spec = session_check("http://127.0.0.1:" + std::to_string(sim.endpoint().port()), history, 2);
    spec["target"]["api"] = "responses";
    spec["workload"]["sessions"]["turns"] = 4;
    const auto [id, view] = run_job(d, spec);
    const json s = d.get_json("/v1/sweeps/" + id + "/steps")["steps"][0]["summary"];
    CHECK(s["sessions"]["history"] == history);
    CHECK(s["sessions"]["broken"] == 0);
    CHECK(s["sessions"]["completed"].get<std::uint64_t>() > 0);
    // The server's count of turn k's prompt (its usage) is the whole conversation in both:
    // k user turns of 30 and k - 1 answers of 20, kept by the server or sent again.
    const auto csv = d.get("/v1/sweeps/" + id + "/requests.csv");
    std::istringstream lines(csv.body);
    std::string line;
    std::getline(lines, line);
    std::map<int, std::size_t> per_turn;
    while (std::getline(lines, line)) {
      const auto cells = csv_cells(line);
      REQUIRE(cells.size() == 16);
      if (cells[11] != "ok") continue;
      const int turn = std::stoi(cells[14]);
      ++per_turn[turn];
      CHECK(std::stoi(cells[8]) == 30 * turn + 20 * (turn - 1));
    }
    CHECK(per_turn.size() == 4);
    const auto sizes = body_sizes(sim);
    REQUIRE(sizes.size() >= 8);
    const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
    spread[history] = static_cast<double>(*hi) / static_cast<double>(*lo);
  }
  INFO("largest over smallest request body: server " << spread["server"] << ", server_state "
                                                     << spread["server_state"]);
  // Turn 4 sends 4 user turns and 3 answers again with client history; with server_state one
  // user turn and an id (the first turn's body lacks the id: a few dozen bytes).
  CHECK(spread["server"] > 2.5);
  CHECK(spread["server_state"] < 1.3);
}

TEST_CASE("traffic: bad sessions settings get a 400 naming the field, and nothing is stored") {
  llmsim::SimConfig cfg;
  SimFixture sim(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  for (const auto& [sessions, field] : std::vector<std::pair<json, std::string>>{
           {{{"turns", 0}}, "/workload/sessions/turns"},
           {{{"turns", 65}}, "/workload/sessions/turns"},
           {{{"turns", 2.5}}, "/workload/sessions/turns"},
           {{{"turns", {{"dist", "uniform"}, {"min", 1}, {"max", 100}}}}, "/workload/sessions/turns"},
           {{{"history", "mine"}}, "/workload/sessions/history"},
           {{{"think_time_ms", -5}}, "/workload/sessions/think_time_ms"},
           {{{"turn", 3}}, "/workload/sessions/turn"},
           {json::array(), "/workload/sessions"}}) {
    json spec = session_check(url, "server", 2);
    spec["workload"]["sessions"] = sessions;
    const auto r = d.post("/v1/sweeps", spec.dump());
    INFO(sessions.dump() << " " << r.body);
    CHECK(r.status == 400);
    CHECK(json::parse(r.body)["error"].value("field", "").rfind(field, 0) == 0);
  }
  // A history the server keeps needs an API that keeps conversations (this target's is chat).
  json kept = session_check(url, "server_state", 2);
  auto refused = d.post("/v1/sweeps", kept.dump());
  CHECK(refused.status == 400);
  CHECK(json::parse(refused.body)["error"].value("field", "") == "/workload/sessions/history");
  CHECK(refused.body.find("responses") != std::string::npos);
  // What presumes independent requests is refused with sessions.
  json spec = session_check(url, "server", 2);
  spec["workload"]["abandon"] = {{"no_first_token_s", 1}};
  auto r = d.post("/v1/sweeps", spec.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/workload/abandon");
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());
  CHECK(d.get("/healthz").status == 200);
}

namespace {

// A trace of 20 rows in bursts of two, 300 ms apart (span 2.7 s; mean gap 2.7 s / 19, so it
// loops every P = 2.7 s x 20/19), each of 64 prompt tokens and 4 answer tokens.
std::string paired_trace() {
  std::string trace;
  for (int k = 0; k < 20; ++k) {
    trace += json{{"timestamp", 300 * (k / 2)}, {"input_length", 64}, {"output_length", 4}}.dump() + "\n";
  }
  return trace;
}

// When request k of paired_trace() is due, replayed looped at `rate` req/s: its row's time plus
// its loop's periods, scaled so that a period's 20 rows take 20 / rate seconds; in ms.
double paired_due_ms(std::size_t k, double rate) {
  const double period_ms = 2700.0 * 20 / 19;
  const double trace_ms = 300.0 * static_cast<double>((k % 20) / 2) + period_ms * static_cast<double>(k / 20);
  return trace_ms * (20'000.0 / rate) / period_ms;
}

// Each step's scheduled times (ms from the step's start) in requests.csv, sorted.
std::map<int, std::vector<double>> scheduled_by_step(const Daemon& d, const std::string& id) {
  const auto csv = d.get("/v1/sweeps/" + id + "/requests.csv");
  std::istringstream lines(csv.body);
  std::string line;
  std::getline(lines, line);  // header
  std::map<int, std::vector<double>> out;
  while (std::getline(lines, line)) {
    const auto cells = csv_cells(line);
    REQUIRE(cells.size() > 2);
    out[std::stoi(cells[0])].push_back(std::stod(cells[2]));
  }
  for (auto& [step, times] : out) std::sort(times.begin(), times.end());
  return out;
}

}  // namespace

TEST_CASE("traffic: a sweep and a regression replay a trace scaled to their rates, its bursts and loop kept") {
  SimFixture sim(quick_sim());
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  const auto up =
      d.post("/v1/datasets?format=trace&name=pairs", paired_trace(), {{"Content-Type", "application/x-ndjson"}});
  REQUIRE(up.status == 201);
  const std::string trace_id = json::parse(up.body)["id"];
  const json target = {{"base_url", url}, {"api", "completions"}, {"model", "sim-8b"}};
  const json slo = {{"ttft_ms", {{"p95", 2000}}}, {"max_error_rate", 0.01}};

  // A regression at 14 req/s: every run is the trace looped at 14 req/s, both sides alike.
  json regression = {{"kind", "regression"},
                     {"baseline", {{"target", target}}},
                     {"candidate", {{"target", target}}},
                     {"workload", {{"dataset", {{"id", trace_id}}}}},
                     {"arrival", {{"process", "trace"}}},
                     {"regression", {{"rate_rps", 14}, {"duration_s", 3}, {"warmup_s", 0}, {"rounds", 2}}},
                     {"slo", slo}};
  json at_speed = regression;
  at_speed["arrival"]["speed"] = 2;
  auto bad = d.post("/v1/sweeps", at_speed.dump());
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body)["error"].value("field", "") == "/arrival/speed");
  const auto [rid, rview] = run_job(d, regression);
  CHECK(rview["result"]["conditions"]["trace"]["dataset"] == trace_id);
  CHECK(rview["result"]["conditions"]["rate_rps"] == 14);
  const auto runs = scheduled_by_step(d, rid);
  REQUIRE(runs.size() == 4);
  for (const auto& [step, times] : runs) {
    INFO("run " << step);
    // Whole loops of 20 rows every 20/14 s: 0-1.43 s, 1.43-2.86 s, then the third loop's first
    // burst (2.857 s) before 3 s; its second (3.008 s) is past the run's end.
    REQUIRE(times.size() == 42);
    CHECK(paired_due_ms(42, 14) >= 3000);
    for (std::size_t k = 0; k < times.size(); ++k) CHECK(times[k] == Approx(paired_due_ms(k, 14)).margin(0.01));
    CHECK(times == runs.begin()->second);
  }

  // A sweep: each rate step replays the trace at its rate; the probe and the baseline send its rows.
  json sweep = {{"name", "trace sweep"},
                {"target", target},
                {"workload", {{"dataset", {{"id", trace_id}}}}},
                {"arrival", {{"process", "trace"}}},
                {"sweep",
                 {{"steps", 2},
                  {"step_duration_s", 2},
                  {"warmup_s", 0},
                  {"baseline_requests", 3},
                  {"probe_requests", 20},
                  {"max_steps", 3}}},
                {"slo", slo}};
  auto r = d.post("/v1/sweeps", sweep.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string sid = json::parse(r.body)["id"];
  const json view = d.wait_for(sid, job_ended, 120s);
  INFO(view.dump(1));
  REQUIRE(view["status"] == "succeeded");
  CHECK(view["result"]["trace"]["dataset"] == trace_id);
  const json steps = d.get_json("/v1/sweeps/" + sid + "/steps")["steps"];
  const auto by_step = scheduled_by_step(d, sid);
  std::size_t rate_steps = 0;
  for (const json& s : steps) {
    if (s["kind"] == "baseline" || s["kind"] == "probe") continue;
    const auto& times = by_step.at(s["index"].get<int>());
    INFO("step " << s["index"] << " offered " << s["offered_rate_rps"]);
    REQUIRE(times.size() > 20);
    // The step's rate from when its last loop began (20 rows a period); every request then
    // falls where the trace scaled to that rate puts it, and as many as fit in 2 s were sent.
    const std::size_t last_loop = (times.size() - 1) / 20;
    const double rate = 20'000.0 * static_cast<double>(last_loop) / times[20 * last_loop];
    for (std::size_t k = 0; k < times.size(); ++k) CHECK(times[k] == Approx(paired_due_ms(k, rate)).margin(0.05));
    CHECK(paired_due_ms(times.size(), rate) >= 2000 - 0.05);
    CHECK(s["offered_rate_rps"].get<double>() == Approx(rate).epsilon(0.15));
    ++rate_steps;
  }
  CHECK(rate_steps >= 2);
}

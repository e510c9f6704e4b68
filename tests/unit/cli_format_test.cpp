// The CLI's text: the verdict first, the SLO in the order people state it, progress, tables.
#include <catch2/catch.hpp>

#include "format.hpp"
#include "lengths.hpp"

using namespace capsweep::cli;
using json = nlohmann::json;

TEST_CASE("cli format: a sweep's verdict line leads with the rate, the SLO, knee and limit") {
  const json sweep = {
      {"status", "succeeded"},
      {"spec", {{"slo", {{"itl_ms", {{"p95", 50}}}, {"ttft_ms", {{"p95", 800}}}, {"max_error_rate", 0.001}}}}},
      {"result",
       {{"kind", "sweep"},
        {"max_slo_rate_rps", 10.2},
        {"knee_rate_rps", 12.7},
        {"limiting_metric", "p95_ttft_ms"},
        {"slo_bracket_rps", {10.2, 10.6}},
        {"saturation_rate_rps", nullptr},
        {"concurrency_at_max_slo", nullptr},
        {"baseline", {{"rate_rps", 1.5}}},
        {"probe", {{"rate_rps", 14.0}}},
        {"warnings", {"w1"}}}}};
  const std::string v = verdict_text(sweep);
  CHECK(v.rfind("max 10.2 req/s within SLO (TTFT p95 \u2264 800 ms, ITL p95 \u2264 50 ms, errors \u2264 0.1%); knee at "
                "12.7 req/s; "
                "limited by TTFT p95",
                0) == 0);
  CHECK(v.find("warning: w1") != std::string::npos);
  json none = sweep;
  none["result"]["max_slo_rate_rps"] = nullptr;
  CHECK(verdict_text(none).rfind("no rate met the SLO", 0) == 0);
  CHECK(verdict_text({{"status", "failed"}, {"error", "baseline: no request succeeded"}}) ==
        "FAILED: baseline: no request succeeded");
  CHECK(verdict_text({{"status", "failed"}, {"error", nullptr}}) == "FAILED: (no reason recorded)");
  CHECK(verdict_text({{"status", "running"}}) == "not finished (running)");
}

TEST_CASE("cli format: a sweep's verdict says where the capacity lies and where the time went") {
  json sweep = {
      {"status", "succeeded"},
      {"result",
       {{"kind", "sweep"},
        {"max_slo_rate_rps", 34.2},
        {"slo_bracket_rps", {34.2, 35.9}},
        {"baseline", {{"rate_rps", 1.5}}},
        {"probe", {{"rate_rps", 37.0}}},
        {"search",
         {{"mode", "scout"},
          {"full_steps", 1},
          {"scout_steps", 5},
          {"time_s", {{"baseline", 6.2}, {"probe", 5.1}, {"scout", 118.4}, {"confirm", 71.9}, {"total", 201.6}}},
          {"resolution",
           {{"step_s", 60.0}, {"undetected_overload_pct", 1.64}, {"capacity_interval_rps", {33.65, 35.9}}}}}}}}};
  const std::string v = verdict_text(sweep);
  CHECK(v.find("capacity between 33.6 and 35.9 req/s (a 60-s step may miss an overload under 1.6%)") !=
        std::string::npos);
  CHECK(v.find("search: scout, 1 full-length steps and 5 scouts; 202 s (baseline 6 s, confirm 72 s, probe 5 s, scout "
               "118 s)") != std::string::npos);
  sweep["result"]["search"]["resolution"] = nullptr;  // no pass: no interval
  CHECK(verdict_text(sweep).find("capacity between") == std::string::npos);
  sweep["result"].erase("search");  // a result from before the block
  CHECK(verdict_text(sweep).find("search:") == std::string::npos);
}

TEST_CASE("cli format: a check's verdict names each criterion") {
  const json check = {
      {"status", "succeeded"},
      {"spec", {{"slo", {{"ttft_ms", {{"p95", 800}}}}}}},
      {"result",
       {{"kind", "check"},
        {"verdict", "fail"},
        {"target", {{"base_url", "http://h:1"}}},
        {"conditions", {{"rate_rps", 10.0}, {"arrival", "poisson"}, {"duration_s", 600.0}}},
        {"criteria", {{{"name", "p95_ttft_ms"}, {"measured", 912.5}, {"bound", 800.0}, {"verdict", "fail"}}}},
        {"saturated", false}}}};
  const std::string v = verdict_text(check);
  CHECK(v.rfind("FAIL: TTFT p95 \u2264 800 ms at 10 req/s", 0) == 0);
  CHECK(v.find("TTFT p95") != std::string::npos);
  CHECK(v.find("912.500") != std::string::npos);
}

TEST_CASE("cli format: a trace check's verdict names its replay speed, a session check its sessions and requests") {
  json check = {{"status", "succeeded"},
                {"spec", {{"slo", {{"ttft_ms", {{"p95", 800}}}}}}},
                {"result",
                 {{"kind", "check"},
                  {"verdict", "pass"},
                  {"target", {{"base_url", "http://h:1"}}},
                  {"conditions",
                   {{"rate_rps", nullptr},
                    {"arrival", "trace"},
                    {"trace", {{"speed", 2.5}, {"loop", false}}},
                    {"duration_s", 60.0}}},
                  {"observations", {{"offered_rate_rps", 7.25}}},
                  {"criteria", json::array()}}}};
  std::string v = verdict_text(check);
  INFO(v);
  CHECK(v.rfind("PASS: TTFT p95 \u2264 800 ms at a trace replayed at 2.5x speed (7.25 req/s offered)", 0) == 0);
  CHECK(v.find("- req/s") == std::string::npos);
  check["result"]["conditions"] = {{"rate_rps", 2.0},
                                   {"arrival", "poisson"},
                                   {"duration_s", 60.0},
                                   {"sessions", {{"history", "server"}, {"offered_rate_rps", 9.5}}}};
  v = verdict_text(check);
  CHECK(v.rfind("PASS: TTFT p95 \u2264 800 ms at 2 sessions/s (9.50 req/s offered as their turns)", 0) == 0);
}

TEST_CASE("cli format: a sweep and a regression over a trace say how they replayed it") {
  json sweep = {{"status", "succeeded"},
                {"result",
                 {{"kind", "sweep"},
                  {"max_slo_rate_rps", 10.0},
                  {"baseline", {{"rate_rps", 1.5}}},
                  {"probe", {{"rate_rps", 14.0}}},
                  {"trace", {{"dataset", "ds-0123456789abcdef"}, {"scaled_to", "each step's rate"}}}}}};
  CHECK(verdict_text(sweep).find("load: trace ds-0123456789abcdef replayed at each step's rate, looped") !=
        std::string::npos);
  sweep["result"].erase("trace");
  CHECK(verdict_text(sweep).find("load: trace") == std::string::npos);
  json regression = {
      {"status", "succeeded"},
      {"result",
       {{"kind", "regression"},
        {"verdict", "pass"},
        {"metrics", json::object()},
        {"conditions",
         {{"rate_rps", nullptr}, {"rounds", 2}, {"duration_s", 30}, {"trace", {{"speed", 2}, {"loop", true}}}}}}}};
  CHECK(compare_text(regression).find(") at a trace replayed at 2x speed, 2 rounds of 30 s") != std::string::npos);
  regression["result"]["conditions"]["rate_rps"] = 14;
  CHECK(compare_text(regression).find(") at 14 req/s (a trace scaled to it), 2 rounds") != std::string::npos);
  regression["result"]["conditions"]["trace"] = nullptr;
  CHECK(compare_text(regression).find(") at 14 req/s, 2 rounds") != std::string::npos);
  CHECK(compare_text(regression).find("rounds: ") == std::string::npos);  // fixed rounds: nothing to say
  regression["result"]["sequential"] = {
      {"stopped", "every metric decided after 5 rounds"}, {"max_rounds", 10}, {"alpha_per_look", 0.05 / 8}};
  CHECK(compare_text(regression)
            .find("  rounds: every metric decided after 5 rounds (at most 10, alpha 0.00625 a look)") !=
        std::string::npos);
}

TEST_CASE("cli format: every kind's verdict prints the whole record - labels, arrivals, server gauges, basis") {
  json check = {{"status", "succeeded"},
                {"result",
                 {{"kind", "check"},
                  {"verdict", "pass"},
                  {"target", {{"base_url", "http://h:1"}}},
                  {"labels", {{"gpu", "h100"}, {"runtime", "vllm-0.11"}}},
                  {"arrival", {{"process", "gamma"}, {"burstiness", 0.5}}},
                  {"conditions", {{"rate_rps", 10.0}, {"arrival", "gamma"}, {"duration_s", 600.0}}},
                  {"observations", {{"server", {{"mean_running", 12.5}, {"max_running", 14}, {"mean_waiting", 3.0}}}}},
                  {"criteria", json::array()},
                  {"mlperf_scenario", "Offline"},
                  {"warnings", {"MLPerf Offline: batch capacity"}},
                  {"basis", "product spec v2 s3"}}}};
  std::string v = verdict_text(check);
  CHECK(v.find("MLPerf scenario: Offline") != std::string::npos);
  CHECK(v.find("warning: MLPerf Offline: batch capacity") != std::string::npos);
  CHECK(v.find("labels: gpu=h100 runtime=vllm-0.11") != std::string::npos);
  CHECK(v.find("arrivals: gamma (burstiness 0.5)") != std::string::npos);
  CHECK(v.find("server: running mean 12.5 max 14, waiting mean 3 max -") != std::string::npos);
  CHECK(v.find("basis: product spec v2 s3") != std::string::npos);
  check["result"].erase("basis");
  check["result"]["observations"].erase("server");
  v = verdict_text(check);
  CHECK(v.find("basis: none given") != std::string::npos);
  CHECK(v.find("server:") == std::string::npos);

  const json regression = {
      {"status", "succeeded"},
      {"result",
       {{"kind", "regression"},
        {"verdict", "pass"},
        {"baseline", {{"base_url", "http://a:1"}, {"labels", {{"runtime", "vllm-0.10"}, {"quantization", "bf16"}}}}},
        {"candidate", {{"base_url", "http://b:1"}, {"labels", {{"runtime", "vllm-0.11"}, {"quantization", "fp8"}}}}},
        {"metrics", json::object()},
        {"basis", "upgrade ticket 42"}}}};
  const std::string r = verdict_text(regression);
  CHECK(r.find("baseline labels: quantization=bf16 runtime=vllm-0.10") != std::string::npos);
  CHECK(r.find("candidate labels: quantization=fp8 runtime=vllm-0.11") != std::string::npos);
  CHECK(r.find("basis: upgrade ticket 42") != std::string::npos);
  CHECK(compare_text(regression).find("candidate labels: quantization=fp8") != std::string::npos);
  json judged = regression;
  judged["result"]["judge"] = {{"baseline_mean", 8.0}, {"candidate_mean", 4.0}, {"verdict", "fail"}, {"gates", false}};
  CHECK(compare_text(judged).find("judge: mean score 8.00 vs 4.00 (-), FAIL; advisory") != std::string::npos);
  judged["result"]["judge"]["gates"] = true;
  judged["result"]["judge"]["calibration"] = {{"spearman", 0.9}, {"ci", {0.8, 0.96}}, {"scored", 30}};
  CHECK(compare_text(judged).find("FAIL; gates: Spearman 0.900 [0.800, 0.960] with 30 human labels") !=
        std::string::npos);

  const json scenario = {{"status", "succeeded"},
                         {"result", {{"kind", "scenario"}, {"verdict", "pass"}, {"basis", "runbook 7"}}}};
  CHECK(verdict_text(scenario).find("basis: runbook 7") != std::string::npos);
  CHECK(verdict_text(scenario).find("labels: none") != std::string::npos);
}

TEST_CASE("cli format: progress with and without a bar - durations") {
  const json running = {{"status", "running"},
                        {"progress",
                         {{"phase", "ladder"},
                          {"step", 4},
                          {"steps_planned", 10},
                          {"percent", 42.0},
                          {"current_rate_rps", 25.6},
                          {"p95_ttft_ms_so_far", 120.0},
                          {"eta_s", 65}}}};
  CHECK(progress_text(running) == "ladder    step 4/10   42.0%  25.6 req/s  p95 TTFT 120 ms  ETA 1m05s");
  CHECK(progress_text(running, true).find("[########............]") != std::string::npos);
  CHECK(progress_text({{"status", "queued"}, {"progress", {{"phase", "queued"}}}}).rfind("queued", 0) == 0);
  CHECK(progress_text({{"status", "running"}, {"progress", {{"phase", nullptr}, {"step", nullptr}}}})
            .rfind("running", 0) == 0);
  CHECK(duration_text(42) == "42s");
  CHECK(duration_text(3725) == "1h02m");
  CHECK(duration_text(-1) == "-");
}

TEST_CASE("cli format: the steps table has units and notes") {
  const json steps = json::array({{{"index", 0},
                                   {"phase", "baseline"},
                                   {"kind", "baseline"},
                                   {"offered_rate_rps", nullptr},
                                   {"verdict", "pass"},
                                   {"summary", {{"rate_rps", 1.88}}},
                                   {"evaluation", json::object()}},
                                  {{"index", 1},
                                   {"phase", "ladder"},
                                   {"kind", "ladder"},
                                   {"offered_rate_rps", 30.0},
                                   {"verdict", "fail"},
                                   {"generator_limited", true},
                                   {"summary", {{"p95_ttft_ms", 900.0}, {"request_throughput", 27.0}}},
                                   {"evaluation", {{"saturation", {{"saturated", true}}}}}}});
  const std::string t = steps_table(steps);
  CHECK(t.find("req/s") != std::string::npos);
  CHECK(t.find("r_sync 1.88") != std::string::npos);
  CHECK(t.find("generator-limited saturated") != std::string::npos);
  CHECK(t.find("900.0") != std::string::npos);
  CHECK(t.find("TTFT p99") != std::string::npos);
  CHECK(t.find("KV%") != std::string::npos);
}

TEST_CASE("cli format: the steps table shows the job's percentiles and the target's gauges") {
  const json steps = json::array(
      {{{"index", 0},
        {"phase", "check"},
        {"kind", "check"},
        {"offered_rate_rps", 10.0},
        {"verdict", "pass"},
        {"summary",
         {{"percentiles", {50, 99.9}}, {"p50_ttft_ms", 41.0}, {"p99.9_ttft_ms", 777.0}, {"p95_ttft_ms", 123.0}}},
        {"server", {{"mean_running", 12.5}, {"mean_waiting", 3.0}, {"max_kv_cache_usage", 0.42}}},
        {"evaluation", json::object()}}});
  const std::string t = steps_table(steps);
  INFO(t);
  CHECK(t.find("TTFT p99.9") != std::string::npos);
  CHECK(t.find("777.0") != std::string::npos);
  CHECK(t.find("TTFT p95") == std::string::npos);  // not chosen
  CHECK(t.find("12.5/3.0") != std::string::npos);
  CHECK(t.find(" 42 ") != std::string::npos);
}

TEST_CASE("cli format: text from the server cannot drive the terminal") {
  // A sweep named with escape sequences: clear screen, set title, C1 CSI.
  const nlohmann::json s = {{"name",
                             "ok\x1b[2J\x1b]0;owned\x07 \xc2\x9b"
                             "31m name\r\nnext"}};
  const std::string shown = text_of(s, "name");
  CHECK(shown.find('\x1b') == std::string::npos);
  CHECK(shown.find('\x07') == std::string::npos);
  CHECK(shown.find("\xc2\x9b") == std::string::npos);
  CHECK(shown.find('\n') == std::string::npos);
  CHECK(shown.find("ok[2J]0;owned") == 0);
  CHECK(terminal_safe("a\tb\nc\x1b", true) == "a\tb\nc");
  CHECK(terminal_safe("caf\xc3\xa9 \xe6\x97\xa5") == "caf\xc3\xa9 \xe6\x97\xa5");  // printable UTF-8 stays
}

TEST_CASE("cli lengths: CSV counts with and without a header, and dataset files, counted as capsweepd counts") {
  auto plain = read_lengths("12\n30\n\n# a comment\n7\n");
  REQUIRE(plain.has_value());
  CHECK(plain->prompt == std::vector<std::uint32_t>{12, 30, 7});
  CHECK(plain->output.empty());
  auto two = read_lengths("5,9\n6,10\n");
  REQUIRE(two.has_value());
  CHECK(two->prompt == std::vector<std::uint32_t>{5, 6});
  CHECK(two->output == std::vector<std::uint32_t>{9, 10});
  auto named = read_lengths("request_id,completion_tokens,prompt_tokens\nx,40,300\ny,41,310\n");
  REQUIRE(named.has_value());
  CHECK(named->prompt == std::vector<std::uint32_t>{300, 310});
  CHECK(named->output == std::vector<std::uint32_t>{40, 41});
  auto jsonl = read_lengths(R"({"prompt": "one two three", "max_tokens": 9}
{"messages": [{"role": "user", "content": "a b"}], "output_tokens": 4}
)");
  REQUIRE(jsonl.has_value());
  CHECK(jsonl->prompt == std::vector<std::uint32_t>{3, 2});
  CHECK(jsonl->output == std::vector<std::uint32_t>{9, 4});
  auto sharegpt = read_lengths(R"([{"conversations": [{"from": "human", "value": "hi there"},
                                                      {"from": "gpt", "value": "a b c d"}]}])");
  REQUIRE(sharegpt.has_value());
  CHECK(sharegpt->prompt == std::vector<std::uint32_t>{2});
  CHECK(sharegpt->output == std::vector<std::uint32_t>{4});

  const json s = lengths_summary(*two);
  CHECK(s["prompt_tokens"]["items"] == 2);
  CHECK(s["output_tokens"]["max"] == 10);
  CHECK(s["prompt_tokens"]["empirical"]["dist"] == "empirical");
  const std::string text = lengths_text(s);
  CHECK(text.find("\"prompt_tokens\": {\"dist\":\"lognormal\"") != std::string::npos);
  CHECK(text.find("\"output_tokens\": {\"dist\":\"empirical\"") != std::string::npos);
}

TEST_CASE("cli lengths: errors name the line") {
  auto bad = read_lengths("10\n0\n");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().field == "line 2");
  auto word = read_lengths("prompt,output\n3,x\n");
  REQUIRE_FALSE(word.has_value());
  CHECK(word.error().field == "line 2");
  auto header = read_lengths("foo,bar\n1,2\n");
  REQUIRE_FALSE(header.has_value());
  CHECK(header.error().field == "line 1");
  CHECK_FALSE(read_lengths("").has_value());
  CHECK_FALSE(read_lengths("# only a comment\n").has_value());
  auto ds = read_lengths("{\"prompt\": \"a\"}\n{\"nope\": 1}\n");
  REQUIRE_FALSE(ds.has_value());
  CHECK(ds.error().field == "line 2: /prompt");
}

// The CLI's text: the verdict first, the SLO in the order people state it, progress, tables.
#include <catch2/catch.hpp>

#include "format.hpp"

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

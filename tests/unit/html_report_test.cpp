// The HTML report: chart geometry and a page that needs nothing from elsewhere.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "report/html.hpp"

using namespace capsweep::report;
using json = nlohmann::json;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

json step(int index, double rate, double p95_ttft, const char* verdict) {
  return {{"index", index},
          {"kind", "ladder"},
          {"phase", "ladder"},
          {"offered_rate_rps", rate},
          {"verdict", verdict},
          {"generator_limited", false},
          {"summary",
           {{"p50_ttft_ms", p95_ttft / 2},
            {"p95_ttft_ms", p95_ttft},
            {"p99_ttft_ms", p95_ttft * 1.5},
            {"p95_itl_ms", 20.0},
            {"mean_tpot_ms", 15.0},
            {"request_throughput", std::min(rate, 30.0)},
            {"request_goodput", std::min(rate, 28.0)},
            {"failed", 0}}},
          {"evaluation", {{"saturation", {{"saturated", rate > 30}}}}},
          {"server", {{"mean_running", rate}, {"mean_waiting", rate > 30 ? 20.0 : 0.0}, {"mean_kv_cache_usage", 0.5}}}};
}

}  // namespace

TEST_CASE("report: ticks are 1-2-5 multiples covering the range") {
  const auto t = nice_ticks(0, 37);
  REQUIRE(t.size() >= 4);
  CHECK(t.front() == 0);
  CHECK(t[1] == Approx(5).margin(1e-9));
  CHECK(t.back() <= 37);
  CHECK(t.back() >= 30);
  const auto small = nice_ticks(0.12, 0.9);
  CHECK(small.front() >= 0.12 - 1e-9);
  CHECK(small[1] - small[0] == Approx(0.1));
  CHECK(nice_ticks(5, 5).size() == 1);  // degenerate range
}

TEST_CASE("report: a chart draws its series, markers, legend and a log axis") {
  Chart c{"TTFT <p95>",
          "offered rate (req/s)",
          "TTFT (ms)",
          {{"p95", "#bf8700", {{10, 30}, {20, 40}, {30, 3000}}}},
          {{"SLO p95 800 ms", 800, "#cf222e"}},
          {{"knee", 25, "#8250df"}},
          true};
  const std::string svg = render_chart(c);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(count(svg, "<circle") == 3);
  CHECK(count(svg, "<polyline") == 1);
  CHECK(count(svg, "class=\"marker\"") == 2);
  CHECK(svg.find("TTFT &lt;p95&gt;") != std::string::npos);  // escaped
  CHECK(svg.find("(log)") != std::string::npos);
  CHECK(svg.find(">1000<") != std::string::npos);  // a power-of-ten tick
  const std::string empty = render_chart(Chart{"nothing", "x", "y", {}, {}, {}, false});
  CHECK(empty.find("no data") != std::string::npos);
}

TEST_CASE("report: the page carries the verdict and charts and fetches nothing") {
  const json sweep = {
      {"id", "sw-0123456789abcdef"},
      {"name", "demo <&>"},
      {"status", "succeeded"},
      {"spec",
       {{"target", {{"base_url", "http://127.0.0.1:8000"}, {"model", "sim-8b"}, {"api", "completions"}}},
        {"slo", {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}}}},
      {"result",
       {{"kind", "sweep"},
        {"max_slo_rate_rps", 29.5},
        {"knee_rate_rps", 27.0},
        {"limiting_metric", "p95_ttft_ms"},
        {"saturation_rate_rps", 31.0},
        {"warnings", {"non-monotone: example"}}}}};
  const json steps = json::array(
      {step(0, 10, 30, "pass"), step(1, 20, 40, "pass"), step(2, 29.5, 300, "pass"), step(3, 31, 2500, "fail")});
  const std::string html = render_report(sweep, steps);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("Max <b>29.5 req/s</b>") != std::string::npos);
  CHECK(html.find("demo &lt;&amp;&gt;") != std::string::npos);
  CHECK(count(html, "<svg class=\"chart\"") == 4);  // TTFT, ITL, throughput, server gauges
  CHECK(count(html, "<tr class=") == 4);
  CHECK(html.find("non-monotone: example") != std::string::npos);
  // Self-contained: no script, no external resource of any kind.
  for (const char* banned : {"<script", "src=", "href=", "@import", "url(", "<link"}) {
    INFO(banned);
    CHECK(html.find(banned) == std::string::npos);
  }
  // Without scraped gauges the fourth chart is left out; without a result the page says so.
  json bare = steps;
  for (auto& s : bare) s["server"] = nullptr;
  json failed = {{"id", "sw-1"}, {"status", "failed"}, {"error", "baseline: no request succeeded"}};
  CHECK(count(render_report(sweep, bare), "<svg class=\"chart\"") == 3);
  CHECK(render_report(failed, json::array()).find("baseline: no request succeeded") != std::string::npos);
}

TEST_CASE("report: a check's page shows distributions with the bound and the step over time, titled check") {
  json dist = json::array();
  for (double q : {0.0, 50.0, 95.0, 100.0}) dist.push_back({q, 10 * q});
  json bins = json::array();
  for (int i = 0; i < 5; ++i) {
    bins.push_back({{"t_s", i},
                    {"scheduled", 10},
                    {"completed", 9},
                    {"failed", 0},
                    {"in_flight", 3 + i},
                    {"p50_ttft_ms", 40.0 + i},
                    {"p95_ttft_ms", 90.0 + i}});
  }
  const json check_step = {{"index", 0},
                           {"kind", "check"},
                           {"phase", "check"},
                           {"offered_rate_rps", 10.0},
                           {"verdict", "pass"},
                           {"summary",
                            {{"p50_ttft_ms", 41.0},
                             {"p99.9_ttft_ms", 333.0},
                             {"p95_ttft_ms", 95.0},
                             {"distribution", {{"ttft_ms", dist}, {"itl_ms", dist}, {"e2el_ms", dist}}},
                             {"timeline", {{"width_s", 1.0}, {"bins", bins}}}}},
                           {"server", {{"mean_running", 7.5}, {"mean_waiting", 0.5}, {"max_kv_cache_usage", 0.31}}}};
  const json sweep = {
      {"id", "sw-00000000000000c1"},
      {"kind", "check"},
      {"name", "standard endpoint"},
      {"status", "succeeded"},
      {"spec",
       {{"kind", "check"},
        {"target", {{"base_url", "http://127.0.0.1:8000"}, {"model", "sim-8b"}, {"labels", {{"gpu", "H100 <80GB>"}}}}},
        {"report", {{"percentiles", {50, 99.9}}}},
        {"slo", {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}}}},
      {"result",
       {{"kind", "check"},
        {"verdict", "pass"},
        {"mlperf_scenario", "Server"},
        {"conditions", {{"mode", "rate"}, {"rate_rps", 10}}}}}};
  const std::string html = render_report(sweep, json::array({check_step}));
  CHECK(html.find("(MLPerf Server scenario)") != std::string::npos);
  json offline = sweep;
  offline["result"]["mlperf_scenario"] = "Offline";
  CHECK(render_report(offline, json::array({check_step}))
            .find("(MLPerf Offline scenario: batch capacity, not interactive capacity)") != std::string::npos);
  CHECK(html.find("<title>capsweep check report") != std::string::npos);
  CHECK(html.find("sweep sw-") == std::string::npos);
  CHECK(html.find("Check verdict: <b>pass</b> at 10 req/s") != std::string::npos);
  CHECK(html.find("gpu=H100 &lt;80GB&gt;") != std::string::npos);  // labels, escaped
  // Three CDFs and two time charts; no rate-axis chart with a single point.
  CHECK(count(html, "<svg class=\"chart\"") == 5);
  CHECK(html.find("TTFT distribution (CDF)") != std::string::npos);
  CHECK(html.find("against offered rate") == std::string::npos);
  CHECK(html.find("SLO p95 800 ms") != std::string::npos);
  CHECK(html.find("Requests in flight") != std::string::npos);
  // The table follows report.percentiles.
  CHECK(html.find("<th>TTFT p99.9 ms</th>") != std::string::npos);
  CHECK(html.find("<th>TTFT p95 ms</th>") == std::string::npos);
  CHECK(html.find("<td>333.0</td>") != std::string::npos);
  CHECK(html.find("7.5 / 0.5") != std::string::npos);
  CHECK(html.find("<td>31</td>") != std::string::npos);
  CHECK(html.find("id=\"turns\"") == std::string::npos);  // no sessions, no turn table
  // A trace's replay: its speed and what it offered, not a rate it never had.
  json trace = sweep;
  trace["result"]["conditions"] = {
      {"mode", "rate"}, {"rate_rps", nullptr}, {"arrival", "trace"}, {"trace", {{"speed", 2}}}};
  trace["result"]["observations"] = {{"offered_rate_rps", 6.5}};
  CHECK(render_report(trace, json::array({check_step}))
            .find("Check verdict: <b>pass</b> at a trace replayed at 2x speed (6.50 req/s offered)") !=
        std::string::npos);
  // Sessions: the rate is theirs, the requests are their turns; a table turn by turn.
  json sessions = sweep;
  sessions["result"]["conditions"] = {
      {"mode", "rate"}, {"rate_rps", 2}, {"sessions", {{"history", "server"}, {"offered_rate_rps", 9.5}}}};
  json step = check_step;
  step["summary"]["sessions"] = {{"started", 12}, {"completed", 10}, {"cut", 2}, {"broken", 0}};
  step["summary"]["turns"] = {{{"turn", 1}, {"completed", 12}, {"mean_prompt_tokens", 30.0}, {"p99.9_ttft_ms", 41.5}},
                              {{"turn", 2}, {"completed", 10}, {"mean_prompt_tokens", 80.0}, {"p99.9_ttft_ms", 77.25}}};
  const std::string with_sessions = render_report(sessions, json::array({step}));
  CHECK(with_sessions.find("Check verdict: <b>pass</b> at 2 sessions/s (9.50 req/s offered as their turns)") !=
        std::string::npos);
  REQUIRE(with_sessions.find("id=\"turns\"") != std::string::npos);
  const std::string table = with_sessions.substr(with_sessions.find("id=\"turns\""));
  CHECK(table.find("<td>80</td>") != std::string::npos);
  CHECK(table.find("<td>77.2</td>") != std::string::npos);
  CHECK(table.find("12 sessions: 10 completed, 2 cut, 0 broken") != std::string::npos);
}

TEST_CASE("report: a regression's page shows both sides per round, the verdict tables and a chart per metric") {
  json steps = json::array();
  for (int i = 0; i < 4; ++i) {
    json s = step(i, 8, i % 2 ? 30.0 : 22.0, "pass");
    s["kind"] = "run";
    s["phase"] = fmt::format("round {} {}", i / 2 + 1, i % 2 ? "candidate" : "baseline");
    s["role"] = i % 2 ? "candidate" : "baseline";
    s["round"] = i / 2;
    s["summary"]["measured"] = 80;
    steps.push_back(s);
  }
  const json metric{{"verdict", "fail"},
                    {"baseline_runs", {22.0, 22.0}},
                    {"candidate_runs", {30.0, 30.0}},
                    {"change_pct", 36.4},
                    {"ci_pct", {30.0, 42.0}},
                    {"threshold_pct", 10},
                    {"worse", "higher"},
                    {"p_value", 0.001},
                    {"test", "paired_t_log_ratio"},
                    {"spread_pct", 1.5},
                    {"a_to_a_exceeds_threshold", false}};
  const json sweep{{"id", "sw-0000000000000001"},
                   {"name", "swap <b>"},
                   {"kind", "regression"},
                   {"status", "succeeded"},
                   {"spec",
                    {{"baseline", {{"target", {{"base_url", "http://a"}, {"model", "m"}, {"api", "chat"}}}}},
                     {"candidate", {{"target", {{"base_url", "http://b"}, {"model", "m"}, {"api", "chat"}}}}},
                     {"regression", {{"rate_rps", 8}, {"rounds", 2}}},
                     {"slo", {{"ttft_ms", {{"p95", 800}}}}}}},
                   {"result",
                    {{"kind", "regression"},
                     {"verdict", "fail"},
                     {"baseline", {{"base_url", "http://a"}}},
                     {"candidate", {{"base_url", "http://b"}}},
                     {"conditions", {{"rate_rps", 8}}},
                     {"metrics", {{"p95_ttft_ms", metric}}},
                     {"quality",
                      {{"json",
                        {{"verdict", "fail"},
                         {"baseline_rate", 1.0},
                         {"candidate_rate", 0.9},
                         {"n", 100},
                         {"drop_pp", 10.0},
                         {"p_value", 0.0005}}}}},
                     {"judge",
                      {{"baseline_mean", 8.0},
                       {"candidate_mean", 6.5},
                       {"scale", 10},
                       {"change_pct", -18.75},
                       {"verdict", "fail"},
                       {"gates", false},
                       {"calibration", {{"calibrated", false}, {"note", "no calibration set (judge.calibration)"}}}}},
                     {"warnings", {"baseline and candidate are the same target"}}}}};
  const std::string page = render_report(sweep, steps);
  CHECK(page.find("<title>capsweep regression report") != std::string::npos);
  CHECK(page.find("Regression verdict: <b>fail</b> for candidate http://b against baseline http://a") !=
        std::string::npos);
  CHECK(page.find("swap &lt;b&gt;") != std::string::npos);  // escaped
  CHECK(page.find("id=\"regression-metrics\"") != std::string::npos);
  CHECK(page.find("+36.4%") != std::string::npos);
  CHECK(page.find("[+30.0%, +42.0%]") != std::string::npos);
  CHECK(page.find("id=\"regression-quality\"") != std::string::npos);
  CHECK(page.find("90.0%") != std::string::npos);
  CHECK(page.find("id=\"judge\"") != std::string::npos);
  CHECK(page.find("Advisory, it gates nothing: no calibration set") != std::string::npos);
  json gating = sweep;
  gating["result"]["judge"]["gates"] = true;
  gating["result"]["judge"]["calibration"] = {
      {"calibrated", true}, {"scored", 40}, {"spearman", 0.91}, {"ci", {0.83, 0.95}}, {"min_agreement", 0.7}};
  const std::string gated = render_report(gating, steps);
  CHECK(gated.find("It gates the verdict: calibrated against 40 human-labelled answers, Spearman 0.910 (interval "
                   "0.830 to 0.950, at least 0.7 asked)") != std::string::npos);
  // Rounds side by side: one row per round with both sides' values and the order they ran in.
  const auto rounds = page.substr(page.find("id=\"regression-rounds\""));
  CHECK(count(rounds.substr(0, rounds.find("</table>")), "<tr>") == 3);  // the head and two rounds
  CHECK(rounds.find("<td>22</td><td>30</td>") != std::string::npos);
  CHECK(rounds.find("A, B") != std::string::npos);
  CHECK(count(page, "<svg class=\"chart\"") == 1);  // one chart: one gated metric
  CHECK(page.find("baseline (A)") != std::string::npos);
  CHECK(page.find("candidate (B)") != std::string::npos);
  for (const char* banned : {"<script", "<link", "src=", "url("}) CHECK(page.find(banned) == std::string::npos);
  CHECK(page.find("same target") != std::string::npos);
}

TEST_CASE("report: a scenario's page draws its timeline with the events marked and the checks beside it") {
  json windows = json::array();
  for (int i = 0; i < 12; ++i) {
    windows.push_back({{"index", i},
                       {"t_start_s", 5.0 * i},
                       {"offered_rps", i < 4 ? 3.0 : 9.0},
                       {"completed", i < 4 ? 15 : 40},
                       {"p95_ttft_ms", i < 4 ? 100.0 : 900.0},
                       {"ready", i < 7 ? 1 : 2},
                       {"desired", i < 5 ? 1 : 2}});
  }
  const json result = {
      {"kind", "scenario"},
      {"verdict", "fail"},
      {"conditions", {{"window_s", 5}, {"duration_s", 60}, {"capacity_rps", 6}, {"target", "http://127.0.0.1:9"}}},
      {"checks",
       {{"scale_up_reaction_s",
         {{"verdict", "fail"},
          {"measured", 15},
          {"bound", 10},
          {"unit", "s"},
          {"windows", {6, 6}},
          {"detail", "<late>"}}},
        {"scale_down",
         {{"verdict", "inconclusive"},
          {"measured", nullptr},
          {"bound", 0},
          {"unit", "streams"},
          {"windows", {nullptr, nullptr}}}}}},
      {"events",
       {{{"kind", "spike"}, {"t_s", 20}},
        {{"kind", "replicas"}, {"which", "ready"}, {"from", 1}, {"to", 2}, {"t_s", 35}}}},
      {"summary",
       {{"scheduled", 400}, {"completed", 390}, {"failed", 10}, {"rejected", 2}, {"pooled_p95_ttft_ms", 850.5}}}};
  const json sweep = {{"id", "sw-1"},
                      {"kind", "scenario"},
                      {"status", "succeeded"},
                      {"spec", {{"slo", {{"ttft_ms", {{"p95", 800}}}}}}},
                      {"result", result}};
  const std::string page = render_report(sweep, json::array(), windows);
  CHECK(page.find("capsweep scenario report") != std::string::npos);
  CHECK(page.find("Scenario verdict: <b>fail</b>") != std::string::npos);
  CHECK(page.find("id=\"scenario-timeline\"") != std::string::npos);
  CHECK(count(page, "<svg class=\"chart\"") == 3);  // rate, TTFT p95, replicas
  CHECK(page.find("SLO p95 800 ms") != std::string::npos);
  // The events on each chart: the spike and the replica change.
  CHECK(count(page, ">spike<") == 3);
  CHECK(count(page, "ready 1→2") == 3);
  // The checks, detail escaped.
  CHECK(page.find("id=\"scenario-checks\"") != std::string::npos);
  CHECK(page.find("scale_up_reaction_s") != std::string::npos);
  CHECK(page.find("&lt;late&gt;") != std::string::npos);
  CHECK(page.find("<late>") == std::string::npos);
  CHECK(page.find("400 requests scheduled") != std::string::npos);
  // Without replica counts, no replicas chart.
  for (auto& w : windows) {
    w.erase("ready");
    w.erase("desired");
  }
  CHECK(count(render_report(sweep, json::array(), windows), "<svg class=\"chart\"") == 2);
}

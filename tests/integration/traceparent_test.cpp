// W3C trace context through the whole path: a check run locally and on two load agents
// against llmsim; every request llmsim received carried a valid traceparent, each step's
// requests one trace (the step summary's engine.trace_id) with a span of their own, and
// requests.csv names each request by the very header llmsim saw.
#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/trace_context.hpp"
#include "integration/llmsim_fixture.hpp"
#include "support/service_fixture.hpp"

using namespace capsweep;
using json = nlohmann::json;

namespace {

json check_against(const testing::SimFixture& sim) {
  return {
      {"kind", "check"},
      {"target", {{"base_url", "http://127.0.0.1:" + std::to_string(sim.endpoint().port())}, {"model", "sim-8b"}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 8}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 4}}}}},
      {"arrival", {{"process", "poisson"}}},
      {"slo", {{"ttft_ms", {{"p95", 800}}}}},
      {"check", {{"rate_rps", 40}, {"duration_s", 3}, {"warmup_s", 0}}}};
}

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream in(line);
  for (std::string cell; std::getline(in, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

// requests.csv's request index -> its traceparent column, for the rows that were sent.
std::map<std::uint64_t, std::string> traceparents(const std::string& csv) {
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  const auto header = cells_of(line);
  REQUIRE(header.size() == 16);
  REQUIRE(header.back() == "traceparent");
  std::map<std::uint64_t, std::string> out;
  while (std::getline(lines, line)) {
    const auto cells = cells_of(line);
    REQUIRE(cells.size() == 16);
    if (cells[4].empty()) continue;  // never sent
    out[std::stoull(cells[1])] = cells.back();
  }
  return out;
}

}  // namespace

TEST_CASE(
    "traceparent: each request carries its step's trace and a span of its own, as requests.csv says, locally "
    "and on two agents") {
  testing::SimFixture sim(testing::fast_sim());
  testing::Service s("traceparent", std::nullopt, true);
  // Run locally, then on two agents; what is checked is what was sent, not the verdict (an
  // agent that fell behind its schedule on a busy machine makes the step inconclusive).
  json spec = check_against(sim);
  const json local = s.run_check(spec, 0);
  spec["agents"] = 2;
  const json shared = s.run_check(spec, 2);
  CHECK(shared["summary"]["agents"]["parts"] == 2);

  // What the server saw: every completion request's headers, calibration's among them.
  const auto r = testing::http_request(sim.endpoint(), "GET", "/sim/spans");
  REQUIRE(r.status == 200);
  const json seen = json::parse(r.body);
  CHECK(seen["dropped"] == 0);
  std::map<std::string, std::string> by_header;  // traceparent -> x-request-id
  for (const json& span : seen["spans"]) {
    const std::string h = span.value("traceparent", "");
    if (h.empty()) continue;  // calibration's requests carry none
    CHECK(span["valid"] == true);
    CHECK(by_header.emplace(h, span.value("request_id", "")).second);  // no header twice
  }

  std::set<std::string> traces;
  std::size_t rows_total = 0;
  for (const json& step : {local, shared}) {
    const std::string trace_hex = step["summary"]["engine"].value("trace_id", "");
    INFO(step["summary"]["engine"].dump());
    const auto trace = parse_trace_id(trace_hex);
    REQUIRE(trace);
    traces.insert(trace_hex);
    const auto csv = s.call("GET", "/v1/sweeps/" + step.value("job_id", "") + "/requests.csv");
    REQUIRE(csv.status == 200);
    const auto rows = traceparents(csv.body);
    CHECK(rows.size() >= 80);  // 40 req/s for 3 s, Poisson
    rows_total += rows.size();
    for (const auto& [index, header] : rows) {
      INFO(index << ": " << header);
      const auto p = parse_traceparent(header);
      REQUIRE(p);
      CHECK(p->trace == *trace);
      CHECK(p->span == request_span_id(*trace, index));
      CHECK(p->flags == 1);
      // The server got exactly this header, on the request of this index.
      const auto it = by_header.find(header);
      REQUIRE(it != by_header.end());
      CHECK(it->second.substr(it->second.rfind('-') + 1) == std::to_string(index));
    }
  }
  CHECK(traces.size() == 2);              // one trace per step: two jobs, two traces
  CHECK(by_header.size() == rows_total);  // and nothing else carried one
}

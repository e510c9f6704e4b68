// A new arrival process added through the arrival table alone: this file registers
// "uniform_gaps" (each gap uniform on [0, 2/rate): a coefficient of variation of 1/sqrt(3),
// between constant's 0 and Poisson's 1) and runs a check job with it through the real API on
// loopback, the job manager and the store, to a stored verdict. Nothing outside this file
// knows the process: the schema's enum, the parser, the burstiness rule and the schedule all
// come from its row.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <stdexcept>

#include "core/random.hpp"
#include "core/schedule.hpp"
#include "integration/llmsim_fixture.hpp"
#include "support/service_fixture.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

ArrivalRow uniform_gaps() {
  ArrivalRow row;
  row.name = "uniform_gaps";
  row.gap = [](Rng& rng, double, double mean) { return 2 * rng.uniform01() * mean; };
  return row;
}

ArrivalProcess registered() {
  static const ArrivalProcess p = register_arrival_process(uniform_gaps());
  return p;
}

json check_job(const json& arrival) {
  return {
      {"kind", "check"},
      {"target", {{"base_url", "http://127.0.0.1:9"}, {"model", "m"}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 8}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 4}}}}},
      {"arrival", arrival},
      {"slo", {{"ttft_ms", {{"p95", 800}}}}},
      {"check", {{"rate_rps", 200}, {"duration_s", 3}, {"warmup_s", 0}}}};
}

// The coefficient of variation of the gaps between consecutive times.
double gap_cv(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  std::vector<double> gaps;
  for (std::size_t i = 1; i < times.size(); ++i) gaps.push_back(times[i] - times[i - 1]);
  double mean = 0, var = 0;
  for (double g : gaps) mean += g / static_cast<double>(gaps.size());
  for (double g : gaps) var += (g - mean) * (g - mean) / static_cast<double>(gaps.size() - 1);
  return std::sqrt(var) / mean;
}

// The scheduled_ms column of a requests.csv.
std::vector<double> scheduled_ms(const std::string& csv) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  std::size_t column = 0;
  {
    std::istringstream header(line);
    std::string name;
    for (std::size_t k = 0; std::getline(header, name, ','); ++k) {
      if (name == "scheduled_ms") column = k;
    }
  }
  std::vector<double> out;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string cell;
    for (std::size_t k = 0; std::getline(row, cell, ','); ++k) {
      if (k == column) out.push_back(std::stod(cell));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("arrivals: a process registered from one file is drawn by the schedule at its rate") {
  const ArrivalProcess p = registered();
  CHECK(to_string(p) == "uniform_gaps");
  CHECK(parse_arrival_process("uniform_gaps", "/arrival/process").value() == p);
  const Schedule s =
      make_schedule(ArrivalSpec{.process = p, .rate_rps = 100}, ScheduleLimit{200s, std::nullopt}, 5).value();
  CHECK(static_cast<double>(s.send_times.size()) == Approx(20000).epsilon(0.03));
  std::vector<double> t;
  for (Nanos x : s.send_times) t.push_back(to_s(x));
  CHECK(gap_cv(t) == Approx(1 / std::sqrt(3.0)).epsilon(0.03));
  // A renewal process like any other: it needs a rate.
  CHECK(make_schedule(ArrivalSpec{.process = p, .rate_rps = 0}, ScheduleLimit{1s, std::nullopt}, 5).error().field ==
        "/rate_rps");
  const auto bad = parse_arrival_process("uniform-gaps", "/arrival/process");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message.find("uniform_gaps") != std::string::npos);  // the table's names
}

TEST_CASE("arrivals: a registered process runs through the API to a stored verdict") {
  registered();
  testing::FakeModel fast;
  fast.ttft = 5ms;
  testing::Service s("arrivals", fast);

  // A burstiness applies only where the row reads one.
  auto r = testing::http_request(s.endpoint, "POST", "/v1/sweeps",
                                 check_job({{"process", "uniform_gaps"}, {"burstiness", 0.5}}).dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/arrival/burstiness");
  r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", check_job({{"process", "uniform-gaps"}}).dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/arrival/process");

  r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", check_job({{"process", "uniform_gaps"}}).dump());
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body).value("id", "");
  const json job = s.wait_end(id);
  REQUIRE(job.value("status", "") == "succeeded");
  CHECK(job["result"].value("verdict", "") == "pass");
  CHECK(job["spec"]["arrival"].value("process", "") == "uniform_gaps");  // stored as submitted

  // What was sent: about 600 requests with the row's gaps, not Poisson's or constant's.
  r = testing::http_request(s.endpoint, "GET", "/v1/sweeps/" + id + "/requests.csv");
  REQUIRE(r.status == 200);
  const std::vector<double> times = scheduled_ms(r.body);
  CHECK(static_cast<double>(times.size()) == Approx(600).epsilon(0.15));
  CHECK(gap_cv(times) == Approx(1 / std::sqrt(3.0)).epsilon(0.15));
}

TEST_CASE("arrivals: the table refuses a process whose name is taken or that has no gaps") {
  registered();
  ArrivalRow again = uniform_gaps();
  CHECK_THROWS_AS(register_arrival_process(again), std::invalid_argument);
  ArrivalRow poisson = uniform_gaps();
  poisson.name = "poisson";
  CHECK_THROWS_AS(register_arrival_process(poisson), std::invalid_argument);
  ArrivalRow no_gap;
  no_gap.name = "no_gap";
  CHECK_THROWS_AS(register_arrival_process(no_gap), std::invalid_argument);
  ArrivalRow burst = uniform_gaps();
  burst.name = "another_burst";
  burst.shape = ArrivalRow::Shape::burst;
  CHECK_THROWS_AS(register_arrival_process(burst), std::invalid_argument);
  // The five from the start keep their values and names.
  CHECK(to_string(ArrivalProcess::gamma) == "gamma");
  CHECK(arrival_row(ArrivalProcess::gamma).burstiness);
  CHECK(arrival_row(ArrivalProcess::trace).shape == ArrivalRow::Shape::replay);
  const auto names = arrival_process_names();
  CHECK(std::find(names.begin(), names.end(), "uniform_gaps") != names.end());
}

TEST_CASE("arrivals: a registered process on two agents sends the local run's schedule to the same verdict") {
  registered();
  testing::SimFixture sim(testing::fast_sim());
  testing::Service s("arrivals-agents", std::nullopt, true);
  json spec = check_job({{"process", "uniform_gaps"}});
  spec["target"] = {{"base_url", "http://127.0.0.1:" + std::to_string(sim.endpoint().port())}, {"model", "sim-8b"}};
  const auto [local, shared] = s.local_and_on_agents(spec, 2);
  // The agents sent the row's gaps: the same scheduled times as the local run.
  const auto times = [&](const json& step) {
    const auto r = s.call("GET", "/v1/sweeps/" + step.value("job_id", "") + "/requests.csv");
    REQUIRE(r.status == 200);
    auto t = scheduled_ms(r.body);
    std::sort(t.begin(), t.end());
    return t;
  };
  const std::vector<double> here = times(local), there = times(shared);
  REQUIRE(here.size() == there.size());
  for (std::size_t i = 0; i < here.size(); ++i) CHECK(there[i] == Approx(here[i]).margin(0.001));
  CHECK(gap_cv(there) == Approx(1 / std::sqrt(3.0)).epsilon(0.15));
}

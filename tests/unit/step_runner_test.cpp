// The step runner through an in-process fake endpoint: dispatch on schedule, closed-loop
// workers, the concurrency cap, drain, cancel and the accounting of every request, with no
// socket. Latency assertions are lower bounds (the fake's own delays) or counts, never speed.

#include "loadgen/step_runner.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>

#include "support/fake_endpoint.hpp"
#include "support/llm_fixtures.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using testing::FakeModel;
using testing::FakeStats;

namespace {

loadgen::StepSpec rate_step(double rps, Nanos duration) {
  loadgen::StepSpec s;
  s.mode = loadgen::Mode::rate;
  s.arrival = {ArrivalProcess::constant, rps, 1.0};
  s.duration = duration;
  s.drain_timeout = 10s;
  s.seed = 7;
  return s;
}

struct Run {
  std::shared_ptr<FakeStats> stats = std::make_shared<FakeStats>();
  std::unique_ptr<loadgen::StepRunner> runner;
  explicit Run(FakeModel model)
      : runner(std::make_unique<loadgen::StepRunner>(testing::loopback_target(1), testing::fixed_workload(16, 4),
                                                     testing::fake_endpoint(std::move(model), stats))) {}
};

std::size_t count(const loadgen::StepResult& r, Outcome o) {
  return static_cast<std::size_t>(
      std::count_if(r.requests.begin(), r.requests.end(), [o](const auto& row) { return row.outcome == o; }));
}

}  // namespace

TEST_CASE("a rate step sends every scheduled request once and measures latency from the schedule") {
  FakeModel m;
  m.ttft = 20ms;
  m.itl = 5ms;
  m.tokens = 4;
  Run run(m);
  auto r = run.runner->run(rate_step(40, 1s));
  REQUIRE(r.has_value());
  // Constant arrivals at 40/s over [0, 1 s): 40 send times.
  CHECK(r->requests.size() == 40);
  CHECK(run.stats->requests == 40);
  CHECK(count(*r, Outcome::ok) == 40);
  CHECK(r->metrics.measured == 40);
  CHECK(r->metrics.completed == 40);
  CHECK(r->metrics.total_output_tokens == 160);
  // Nothing can be faster than the fake: TTFT from the schedule >= its 20 ms, ITL >= 5 ms.
  CHECK(r->metrics.ttft_ms.min() >= 20.0);
  CHECK(r->metrics.itl_ms.min() >= 5.0);
  CHECK(r->metrics.itl_ms.count() == 40 * 3);
  CHECK(r->metrics.tpot_ms.count() == 40);
  for (const auto& row : r->requests) {
    CHECK(row.sent_ms >= row.scheduled_ms);
    CHECK(row.e2el_ms >= row.ttft_ms + 15.0);
    CHECK(row.chunks == 4);
  }
  CHECK_FALSE(r->cancelled);
  CHECK(run.runner->progress().in_flight == 0);
  CHECK(run.runner->progress().done == 40);
}

TEST_CASE("a closed-loop step keeps exactly N requests in flight") {
  FakeModel m;
  m.ttft = 10ms;
  m.itl = 2ms;
  Run run(m);
  loadgen::StepSpec s;
  s.mode = loadgen::Mode::concurrency;
  s.concurrency = 3;
  s.requests = 30;
  s.drain_timeout = 10s;
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  CHECK(r->requests.size() == 30);
  CHECK(count(*r, Outcome::ok) == 30);
  CHECK(r->peak_in_flight == 3);
  CHECK(run.stats->max_concurrent == 3);
}

TEST_CASE("a closed-loop user waits its think time after each answer before the next request") {
  FakeModel m;
  m.ttft = 2ms;
  m.itl = 1ms;
  Run run(m);
  loadgen::StepSpec s;
  s.mode = loadgen::Mode::concurrency;
  s.concurrency = 2;
  s.requests = 20;
  s.drain_timeout = 10s;
  s.think_time_ms = LengthDist::fixed(30);
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  REQUIRE(r->requests.size() == 20);
  CHECK(count(*r, Outcome::ok) == 20);
  // Two users, ten requests each: the last request is sent after at least nine think times.
  double first = 1e18, last = 0;
  for (const auto& q : r->requests) {
    first = std::min(first, q.scheduled_ms);
    last = std::max(last, q.scheduled_ms);
  }
  CHECK(last - first >= 9 * 30);
  CHECK(r->peak_in_flight <= 2);
}

TEST_CASE("a think time longer than the step does not hold the step past its end") {
  FakeModel m;
  m.ttft = 2ms;
  m.itl = 1ms;
  Run run(m);
  loadgen::StepSpec s;
  s.mode = loadgen::Mode::concurrency;
  s.concurrency = 3;
  s.duration = 300ms;
  s.drain_timeout = 10s;
  s.think_time_ms = LengthDist::fixed(3'600'000);  // an hour
  const auto started = std::chrono::steady_clock::now();
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  CHECK(r->requests.size() == 3);                           // each user sent once, then thought past the end
  CHECK(std::chrono::steady_clock::now() - started < 60s);  // a bound far above any machine's noise
}

TEST_CASE("concurrency mode without a concurrency is refused, naming the field") {
  Run run(FakeModel{});
  loadgen::StepSpec s;
  s.mode = loadgen::Mode::concurrency;
  s.concurrency = 0;
  auto r = run.runner->run(s);
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().field == "/concurrency");
  CHECK(run.stats->requests == 0);
}

TEST_CASE("a concurrency cap in rate mode queues requests on the client, and the wait is measured") {
  FakeModel m;
  m.ttft = 100ms;
  m.itl = 1ms;
  m.tokens = 2;
  Run run(m);
  auto s = rate_step(50, 500ms);
  s.concurrency = 2;
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  CHECK(r->requests.size() == 25);
  CHECK(count(*r, Outcome::ok) == 25);
  CHECK(run.stats->max_concurrent <= 2);
  CHECK(r->peak_in_flight <= 2);
  // 25 requests of >= 100 ms through 2 slots cannot all go when scheduled.
  CHECK(r->metrics.client_queue_ms.max() > 0.0);
  for (const auto& row : r->requests) CHECK(row.ttft_ms >= 100.0);
}

TEST_CASE("failures of the endpoint are counted by outcome, never as successes") {
  FakeModel m;
  m.ttft = 5ms;
  m.outcome_of = [](std::uint64_t i) { return i % 4 == 0 ? Outcome::http_5xx : Outcome::ok; };
  Run run(m);
  auto r = run.runner->run(rate_step(40, 1s));
  REQUIRE(r.has_value());
  CHECK(count(*r, Outcome::http_5xx) == 10);
  CHECK(count(*r, Outcome::ok) == 30);
  CHECK(r->metrics.outcomes[static_cast<std::size_t>(Outcome::http_5xx)] == 10);
  CHECK(r->metrics.completed == 30);
  CHECK(r->metrics.error_rate() == Approx(0.25));
  CHECK(run.runner->progress().failed == 10);
}

TEST_CASE("a request that throws inside the generator settles as client_error and the step ends") {
  FakeModel m;
  m.ttft = 5ms;
  Run run(m);
  auto s = rate_step(20, 500ms);
  s.fail_request = 3;
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  CHECK(r->requests.size() == 10);
  CHECK(count(*r, Outcome::client_error) == 1);
  CHECK(count(*r, Outcome::ok) == 9);
  CHECK(run.stats->requests == 9);  // the failed one never reached the endpoint
  CHECK(run.runner->progress().in_flight == 0);
}

TEST_CASE("requests still running at the drain timeout end as incomplete, not cancelled") {
  FakeModel m;
  m.hang = true;
  Run run(m);
  auto s = rate_step(20, 250ms);
  s.drain_timeout = 200ms;
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  CHECK(r->requests.size() == 5);
  CHECK(count(*r, Outcome::incomplete) == 5);
  CHECK_FALSE(r->cancelled);
  CHECK(run.stats->cancel_calls >= 1);
  CHECK(r->metrics.completed == 0);
  CHECK(r->metrics.incomplete_elapsed_ms.size() == 5);
}

TEST_CASE("cancel stops dispatch and aborts requests in flight, and every request is accounted for") {
  FakeModel m;
  m.hang = true;
  Run run(m);
  auto s = rate_step(20, 30s);  // 600 requests if it ran to the end
  s.drain_timeout = 60s;
  std::thread canceller([&] {
    // Cancel once requests are in flight (bounded wait).
    for (int i = 0; i < 400 && run.runner->progress().in_flight < 3; ++i) std::this_thread::sleep_for(5ms);
    run.runner->cancel();
  });
  auto r = run.runner->run(s);
  canceller.join();
  REQUIRE(r.has_value());
  CHECK(r->cancelled);
  CHECK(r->requests.size() >= 3);
  CHECK(r->requests.size() < 600);
  CHECK(count(*r, Outcome::cancelled) == r->requests.size());
  CHECK(r->requests.size() == run.runner->progress().scheduled);
  CHECK(run.runner->progress().in_flight == 0);
}

TEST_CASE("a cancel before the step begins ends it at once") {
  Run run(FakeModel{});
  run.runner->cancel();
  auto r = run.runner->run(rate_step(20, 30s));
  REQUIRE(r.has_value());
  CHECK(r->cancelled);
  CHECK(r->requests.size() <= 1);
}

TEST_CASE("warm-up requests are run but not measured") {
  FakeModel m;
  m.ttft = 5ms;
  m.itl = 1ms;
  Run run(m);
  auto s = rate_step(40, 1s);
  s.warmup = 500ms;
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  CHECK(r->requests.size() == 40);
  CHECK(r->metrics.measured == 20);
  CHECK(r->metrics.completed == 20);
}

namespace {

// A rate step stopped "decided" on `slo`, at most `longest`, looked at from 500 ms and 20 requests.
loadgen::StepSpec decided_step(double rps, Nanos longest, const char* slo) {
  loadgen::StepSpec s = rate_step(rps, longest);
  s.warmup = 200ms;
  DecideSettings d;
  d.min_time = 500ms;
  d.min_requests = 20;
  s.decide = loadgen::DecidedStop{parse_slo(nlohmann::json::parse(slo)).value(), d};
  return s;
}

}  // namespace

TEST_CASE("a step stopped when decided ends at its decision, drains, and accounts for every request") {
  FakeModel m;
  m.ttft = 20ms;
  m.itl = 2ms;
  SECTION("a pass") {
    Run run(m);
    auto r = run.runner->run(decided_step(50, 30s, R"({"ttft_ms": {"p50": 500}})"));
    REQUIRE(r.has_value());
    CHECK(r->stopped_by == StopReason::decided);
    REQUIRE(r->decision);
    CHECK(r->decision->verdict == Verdict::pass);
    CHECK(r->looks >= 1);
    // Of the 1,500 requests of 30 s, only those before the decision went out, every one answered.
    CHECK(r->requests.size() < 300);
    CHECK(r->requests.size() == run.stats->requests);
    CHECK(r->requests.size() == run.runner->progress().scheduled);
    CHECK(count(*r, Outcome::ok) == r->requests.size());
    // The measured window ends at the decision; nothing measured was scheduled after it.
    CHECK(r->metrics.window_end == r->decision->at);
    for (const auto& row : r->requests) CHECK(row.scheduled_ms < to_ms(r->decision->at));
    CHECK(evaluate_slo(parse_slo(nlohmann::json::parse(R"({"ttft_ms": {"p50": 500}})")).value(), r->metrics).verdict ==
          Verdict::pass);
    const auto summary = r->summary();
    CHECK(summary["stop"]["by"] == "decided");
    CHECK(summary["stop"]["decided"] == "pass");
    CHECK(summary["stop"]["at_s"].get<double>() == Approx(to_s(r->decision->at)));
  }
  SECTION("a fail") {
    m.ttft = 120ms;
    Run run(m);
    auto r = run.runner->run(decided_step(50, 30s, R"({"ttft_ms": {"p50": 100}})"));
    REQUIRE(r.has_value());
    CHECK(r->stopped_by == StopReason::decided);
    REQUIRE(r->decision);
    CHECK(r->decision->verdict == Verdict::fail);
    CHECK(r->requests.size() < 300);
    CHECK(count(*r, Outcome::ok) == r->requests.size());
  }
  SECTION("never looked at: the step runs to its longest") {
    Run run(m);
    auto s = decided_step(40, 1s, R"({"ttft_ms": {"p50": 500}})");
    s.decide->settings.min_requests = 1000;
    auto r = run.runner->run(s);
    REQUIRE(r.has_value());
    CHECK(r->stopped_by == StopReason::max_length);
    CHECK_FALSE(r->decision);
    CHECK(r->looks == 0);
    CHECK(r->requests.size() == 40);
    CHECK(r->summary()["stop"]["by"] == "max_length");
  }
  SECTION("no percentile bound: nothing to decide, the fixed length") {
    Run run(m);
    auto r = run.runner->run(decided_step(40, 1s, R"({"ttft_ms": {"mean": 500}})"));
    REQUIRE(r.has_value());
    CHECK(r->stopped_by == StopReason::fixed_length);
    CHECK(r->requests.size() == 40);
    CHECK_FALSE(r->summary().contains("stop"));
  }
}

TEST_CASE("a step whose generator fell behind its schedule is not decided") {
  FakeModel m;
  m.ttft = 5ms;
  m.itl = 1ms;
  Run run(m);
  auto s = decided_step(50, 2s, R"({"ttft_ms": {"p50": 5000}})");
  // A 400 ms stall at request 15 makes ~20 of the step's 100 requests late by more than 5 ms.
  s.stall_before = 15;
  s.stall = 400ms;
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  CHECK(r->stopped_by == StopReason::max_length);
  CHECK(r->looks >= 1);
  CHECK(r->requests.size() == 100);
  CHECK(r->generator_limited);
}

TEST_CASE("engine_parts takes one part per 1,000 req/s up to the threads allowed, one for what sees every request") {
  auto s = rate_step(500, 1s);
  s.engine_threads = 4;
  CHECK(loadgen::engine_parts(s) == 1);
  s.arrival.rate_rps = 2500;
  CHECK(loadgen::engine_parts(s) == 3);
  s.arrival.rate_rps = 100'000;
  CHECK(loadgen::engine_parts(s) == 4);
  s.engine_threads = 1;
  CHECK(loadgen::engine_parts(s) == 1);
  s.engine_threads = 0;  // treated as one
  CHECK(loadgen::engine_parts(s) == 1);
  s.engine_threads = 4;
  s.track_live = true;
  CHECK(loadgen::engine_parts(s) == 1);
  s.track_live = false;
  s.on_ended = [](const RequestRecord&) {};
  CHECK(loadgen::engine_parts(s) == 1);
  s.on_ended = nullptr;
  s.decide = loadgen::DecidedStop{};
  CHECK(loadgen::engine_parts(s) == 1);
  s.decide.reset();
  // Closed loop: by users, never more parts than users.
  s.mode = loadgen::Mode::concurrency;
  s.concurrency = 2;
  CHECK(loadgen::engine_parts(s) == 1);
  s.concurrency = 1500;
  CHECK(loadgen::engine_parts(s) == 2);
  s.engine_threads = 8;
  s.concurrency = 5000;
  CHECK(loadgen::engine_parts(s) == 5);
}

TEST_CASE("a step split over engine parts sends the one-part schedule exactly, once each, and merges its records") {
  FakeModel m;
  m.ttft = 5ms;
  m.itl = 1ms;
  m.tokens = 3;
  auto spec = rate_step(3000, 1s);
  spec.arrival = {ArrivalProcess::gamma, 3000, 0.5};  // bursty: the split must keep the bursts
  spec.warmup = 200ms;
  const auto whole = make_schedule(spec.arrival, {spec.duration, std::nullopt}, spec.seed).value();

  Run one(m);
  auto r1 = one.runner->run(spec);
  REQUIRE(r1.has_value());
  spec.engine_threads = 3;
  Run three(m);
  auto r3 = three.runner->run(spec);
  REQUIRE(r3.has_value());
  CHECK(r1->engine_parts == 1);
  CHECK(r3->engine_parts == 3);
  CHECK(r1->schedule_digest == r3->schedule_digest);
  CHECK(r1->schedule_digest != 0);

  // Every scheduled request went out once, at its own time: the rows' (index, scheduled)
  // pairs are the whole schedule's.
  REQUIRE(r3->requests.size() == whole.send_times.size());
  CHECK(three.stats->requests == whole.send_times.size());
  std::vector<std::pair<std::uint64_t, double>> sent;
  for (const auto& row : r3->requests) sent.emplace_back(row.index, row.scheduled_ms);
  std::sort(sent.begin(), sent.end());
  for (std::size_t j = 0; j < sent.size(); ++j) {
    CHECK(sent[j].first == j);
    CHECK(sent[j].second == Approx(to_ms(whole.send_times[j])).margin(1e-9));
  }
  // Rows in completion order over all parts.
  CHECK(std::is_sorted(r3->requests.begin(), r3->requests.end(),
                       [](const auto& a, const auto& b) { return a.finished_ms < b.finished_ms; }));
  // The merged counts are the one-part step's: the same requests measured, completed, tokens.
  CHECK(r3->metrics.measured == r1->metrics.measured);
  CHECK(r3->metrics.completed == r1->metrics.completed);
  CHECK(r3->metrics.total_output_tokens == r1->metrics.total_output_tokens);
  CHECK(r3->metrics.ttft_ms.count() == r1->metrics.ttft_ms.count());
  CHECK(r3->metrics.itl_ms.count() == r1->metrics.itl_ms.count());
  CHECK(r3->metrics.schedule_lag_ms.count() == r1->metrics.schedule_lag_ms.count());
  CHECK(r3->metrics.ttft_ms.min() >= 5.0);
  CHECK(three.runner->progress().in_flight == 0);
  CHECK(three.runner->progress().done == whole.send_times.size());
  const auto summary = r3->summary();
  CHECK(summary.at("engine").at("parts") == 3);
  CHECK(summary.at("engine").at("schedule_digest").get<std::string>().size() == 16);
}

TEST_CASE("a capped step split over parts caps each part at its share and says the cap is approximate") {
  FakeModel m;
  m.ttft = 50ms;
  m.itl = 10ms;
  m.tokens = 2;
  auto spec = rate_step(2500, 400ms);
  spec.concurrency = 10;
  spec.engine_threads = 3;
  Run run(m);
  auto r = run.runner->run(spec);
  REQUIRE(r.has_value());
  CHECK(r->engine_parts == 3);
  CHECK(r->concurrency_cap_per_part == 4);  // ⌈10 / 3⌉
  CHECK(r->peak_in_flight <= 12);
  CHECK(r->peak_in_flight >= 10);
  CHECK(run.stats->max_concurrent <= 4);
  const auto summary = r->summary();
  CHECK(summary.at("engine").at("concurrency_cap_approximate") == true);
  CHECK(r->requests.size() == 1000);  // capped requests still all accounted for
}

TEST_CASE("a counted closed-loop step split over parts sends each index once") {
  FakeModel m;
  m.ttft = 1ms;
  m.itl = 1ms;
  m.tokens = 2;
  loadgen::StepSpec s;
  s.mode = loadgen::Mode::concurrency;
  s.concurrency = 2000;
  s.requests = 5001;
  s.duration = 30s;
  s.drain_timeout = 10s;
  s.engine_threads = 2;
  Run run(m);
  auto r = run.runner->run(s);
  REQUIRE(r.has_value());
  CHECK(r->engine_parts == 2);
  REQUIRE(r->requests.size() == 5001);
  std::vector<std::uint64_t> indices;
  for (const auto& row : r->requests) indices.push_back(row.index);
  std::sort(indices.begin(), indices.end());
  for (std::size_t j = 0; j < indices.size(); ++j) CHECK(indices[j] == j);
  CHECK(r->peak_in_flight <= 2000);
}

TEST_CASE("cancelling a split step stops every part") {
  FakeModel m;
  m.hang = true;
  auto spec = rate_step(2000, 20s);
  spec.engine_threads = 2;
  Run run(m);
  std::thread stop([&] {
    std::this_thread::sleep_for(300ms);
    run.runner->cancel();
  });
  auto r = run.runner->run(spec);
  stop.join();
  REQUIRE(r.has_value());
  CHECK(r->cancelled);
  CHECK(r->engine_parts == 2);
  CHECK(run.runner->progress().in_flight == 0);
  CHECK(r->requests.size() < 10000);
}

namespace {

// A fake target of three replicas behind `model` (each replica's ITL as the model says).
std::unique_ptr<loadgen::StepRunner> replicas_runner(FakeModel model, std::shared_ptr<FakeStats> stats,
                                                     llm::Balance balance) {
  llm::Target t = testing::loopback_target(1);
  for (int k = 0; k < 3; ++k)
    t.replicas.push_back(
        {"http://127.0.0.1:" + std::to_string(k + 1), "http", "127.0.0.1", static_cast<std::uint16_t>(k + 1), ""});
  t.balance = balance;
  return std::make_unique<loadgen::StepRunner>(t, testing::fixed_workload(16, 4),
                                               testing::fake_endpoint(std::move(model), std::move(stats)));
}

}  // namespace

TEST_CASE("round robin spreads a step split over parts within 1 request per replica, each replica's figures kept") {
  auto stats = std::make_shared<FakeStats>();
  FakeModel m;
  m.ttft = 2ms;
  m.itl = 1ms;
  m.tokens = 2;
  auto runner = replicas_runner(m, stats, llm::Balance::round_robin);
  auto spec = rate_step(2500, 400ms);  // 1,000 sent by 3 engine parts
  spec.engine_threads = 3;
  auto r = runner->run(spec);
  REQUIRE(r.has_value());
  REQUIRE(r->requests.size() == 1000);
  const std::uint64_t a = stats->by_replica[0], b = stats->by_replica[1], c = stats->by_replica[2];
  CHECK(a + b + c == 1000);
  CHECK(std::max({a, b, c}) - std::min({a, b, c}) <= 1);
  REQUIRE(r->metrics.by_replica.parts.size() == 3);
  CHECK(r->metrics.by_replica.names[2] == "http://127.0.0.1:3");
  for (std::size_t k = 0; k < 3; ++k) CHECK(r->metrics.by_replica.parts[k].measured == stats->by_replica[k]);
  for (const auto& n : runner->progress().replica_in_flight) CHECK(n == 0);  // each one left its replica
}

TEST_CASE("least in flight sends more to the replica that answers sooner") {
  auto stats = std::make_shared<FakeStats>();
  FakeModel m;
  m.ttft = 5ms;
  m.tokens = 5;
  m.replica_itl = {2ms, 40ms, 40ms};  // ~13 ms on replica 0, ~165 ms on the others
  auto runner = replicas_runner(m, stats, llm::Balance::least_in_flight);
  auto r = runner->run(rate_step(100, 2s));
  REQUIRE(r.has_value());
  CHECK(r->metrics.completed == 200);
  // The slow replicas hold their requests ~12 times longer: each takes a request only while
  // the fast one has as many in flight, which it seldom has.
  CHECK(stats->by_replica[0] > 3 * stats->by_replica[1]);
  CHECK(stats->by_replica[0] > 3 * stats->by_replica[2]);
}

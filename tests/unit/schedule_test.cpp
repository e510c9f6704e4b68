#include "core/schedule.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

using namespace capsweep;
using namespace std::chrono_literals;

namespace {

std::vector<double> gaps_s(const Schedule& s) {
  std::vector<double> g;
  double prev = 0;
  for (auto t : s.send_times) {
    g.push_back(to_s(t) - prev);
    prev = to_s(t);
  }
  return g;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double cv_of(const std::vector<double>& v) {
  const double m = mean_of(v);
  double s2 = 0;
  for (double x : v) s2 += (x - m) * (x - m);
  return std::sqrt(s2 / static_cast<double>(v.size())) / m;
}

}  // namespace

TEST_CASE("constant arrivals are evenly spaced from zero") {
  auto s = make_schedule({ArrivalProcess::constant, 4.0, 1.0}, {2s, std::nullopt}, 1).value();
  REQUIRE(s.send_times.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) CHECK(s.send_times[i] == Nanos(i * 250'000'000));
}

TEST_CASE("a count limit stops the schedule - and so does a duration - whichever comes first") {
  auto by_count = make_schedule({ArrivalProcess::poisson, 100, 1}, {10s, 50}, 1).value();
  CHECK(by_count.send_times.size() == 50);
  auto by_time = make_schedule({ArrivalProcess::constant, 10, 1}, {1s, 500}, 1).value();
  CHECK(by_time.send_times.size() == 10);
  CHECK(by_time.send_times.back() < 1s);
}

TEST_CASE("poisson: mean rate over 100k draws and exponential gaps (Kolmogorov-Smirnov)") {
  const double rate = 50;
  auto s = make_schedule({ArrivalProcess::poisson, rate, 1}, {std::nullopt, 100000}, 42).value();
  REQUIRE(s.send_times.size() == 100000);
  REQUIRE(std::is_sorted(s.send_times.begin(), s.send_times.end()));
  auto g = gaps_s(s);
  CHECK(1.0 / mean_of(g) == Approx(rate).epsilon(0.01));
  // One-sample KS statistic against F(x) = 1 - exp(-rate x); critical value at alpha = 0.01
  // is 1.628 / sqrt(n).
  std::sort(g.begin(), g.end());
  const double n = static_cast<double>(g.size());
  double d = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double f = 1 - std::exp(-rate * g[i]);
    d = std::max({d, (i + 1) / n - f, f - i / n});
  }
  CHECK(d < 1.628 / std::sqrt(n));
}

TEST_CASE("the KS check can fail: constant gaps are not exponential") {
  const double rate = 50;
  auto s = make_schedule({ArrivalProcess::constant, rate, 1}, {std::nullopt, 10000}, 42).value();
  auto g = gaps_s(s);
  std::sort(g.begin(), g.end());
  const double n = static_cast<double>(g.size());
  double d = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double f = 1 - std::exp(-rate * g[i]);
    d = std::max({d, (i + 1) / n - f, f - i / n});
  }
  CHECK(d > 1.628 / std::sqrt(n));
}

TEST_CASE("gamma: mean rate holds and the gap CV is 1/sqrt(b)") {
  for (double b : {0.25, 0.5, 1.0, 4.0}) {
    INFO("burstiness " << b);
    auto s = make_schedule({ArrivalProcess::gamma, 20, b}, {std::nullopt, 100000}, 9).value();
    auto g = gaps_s(s);
    CHECK(1.0 / mean_of(g) == Approx(20).epsilon(0.02));
    CHECK(cv_of(g) == Approx(1 / std::sqrt(b)).epsilon(0.03));
  }
}

TEST_CASE("over a duration the count matches rate x duration") {
  auto s = make_schedule({ArrivalProcess::poisson, 200, 1}, {500s, std::nullopt}, 3).value();
  // Poisson count: mean 100000, sd ~316; 5 sd = 1.6%.
  CHECK(static_cast<double>(s.send_times.size()) == Approx(100000).epsilon(0.016));
  CHECK(s.send_times.back() < 500s);
}

TEST_CASE("the same seed gives an identical schedule - another seed a different one") {
  ArrivalSpec spec{ArrivalProcess::gamma, 7.5, 0.5};
  auto a = make_schedule(spec, {60s, std::nullopt}, 1234).value();
  auto b = make_schedule(spec, {60s, std::nullopt}, 1234).value();
  auto c = make_schedule(spec, {60s, std::nullopt}, 1235).value();
  CHECK(a.send_times == b.send_times);
  CHECK(a.send_times != c.send_times);
}

TEST_CASE("all_at_once sends every request at zero and needs a count") {
  auto s = make_schedule({ArrivalProcess::all_at_once, 0, 1}, {std::nullopt, 64}, 1).value();
  CHECK(s.send_times.size() == 64);
  CHECK(std::all_of(s.send_times.begin(), s.send_times.end(), [](Nanos t) { return t == Nanos(0); }));
  auto no_count = make_schedule({ArrivalProcess::all_at_once, 0, 1}, {10s, std::nullopt}, 1);
  REQUIRE_FALSE(no_count.has_value());
  CHECK(no_count.error().field == "/requests");
}

TEST_CASE("bad parameters are errors - not crashes") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double rate : {0.0, -1.0, nan, inf}) {
    auto r = make_schedule({ArrivalProcess::poisson, rate, 1}, {10s, std::nullopt}, 1);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == "/rate_rps");
  }
  for (double b : {0.0, -0.5, nan, inf}) {
    auto r = make_schedule({ArrivalProcess::gamma, 5, b}, {10s, std::nullopt}, 1);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == "/burstiness");
  }
  // Burstiness does not matter to other processes.
  CHECK(make_schedule({ArrivalProcess::poisson, 5, 0}, {1s, std::nullopt}, 1).has_value());
  auto no_limit = make_schedule({ArrivalProcess::constant, 5, 1}, {}, 1);
  CHECK_FALSE(no_limit.has_value());
  auto huge = make_schedule({ArrivalProcess::poisson, 1e6, 1}, {3600s, std::nullopt}, 1);
  REQUIRE_FALSE(huge.has_value());
  CHECK(huge.error().message.find("more than") != std::string::npos);
}

TEST_CASE("arrival process names parse and print") {
  for (auto p :
       {ArrivalProcess::constant, ArrivalProcess::poisson, ArrivalProcess::gamma, ArrivalProcess::all_at_once}) {
    CHECK(parse_arrival_process(to_string(p), "/arrival/process").value() == p);
  }
  auto bad = parse_arrival_process("bursty", "/arrival/process");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().field == "/arrival/process");
  CHECK(bad.error().message.find("bursty") != std::string::npos);
  CHECK_FALSE(parse_arrival_process("", "/a").has_value());
  CHECK_FALSE(parse_arrival_process("Poisson", "/a").has_value());
}

TEST_CASE("a schedule split by index: the union of the parts is the whole, bit for bit, for any number of parts") {
  const ArrivalSpec spec{ArrivalProcess::gamma, 500.0, 0.25};  // very bursty
  const auto whole = make_schedule(spec, {10s, std::nullopt}, 99).value();
  REQUIRE(whole.send_times.size() > 4000);
  const std::uint64_t digest = schedule_digest(whole, 5);
  for (std::uint32_t parts : {1u, 2u, 3u, 4u, 7u, 32u}) {
    std::vector<Nanos> merged(whole.send_times.size(), Nanos(-1));
    std::size_t total = 0;
    for (std::uint32_t p = 0; p < parts; ++p) {
      const auto part = split_schedule(whole, p, parts, 5);
      CHECK(part.digest == digest);
      CHECK(part.part == p);
      CHECK(part.parts == parts);
      REQUIRE(part.indices.size() == part.send_times.size());
      CHECK(part.indices.size() == part_count(whole.send_times.size(), p, parts));
      for (std::size_t k = 0; k < part.indices.size(); ++k) {
        const auto j = part.indices[k];
        CHECK(j % parts == p);
        REQUIRE(j < merged.size());
        CHECK(merged[j] == Nanos(-1));  // no index in two parts
        merged[j] = part.send_times[k];
      }
      CHECK(std::is_sorted(part.indices.begin(), part.indices.end()));
      total += part.indices.size();
    }
    CHECK(total == whole.send_times.size());
    CHECK(merged == whole.send_times);  // same times, exactly: the aggregate keeps gamma's bursts
  }
}

TEST_CASE("split_schedule of an empty schedule and more parts than requests") {
  Schedule empty{{ArrivalProcess::poisson, 1, 1}, {}};
  const auto part = split_schedule(empty, 0, 4);
  CHECK(part.indices.empty());
  CHECK(part.digest == schedule_digest(empty));
  auto tiny = make_schedule({ArrivalProcess::constant, 10, 1}, {std::nullopt, 3}, 1).value();
  REQUIRE(tiny.send_times.size() == 3);
  CHECK(split_schedule(tiny, 2, 5).indices == std::vector<std::uint64_t>{2});
  CHECK(split_schedule(tiny, 4, 5).indices.empty());
  CHECK(part_count(3, 4, 5) == 0);
  CHECK(part_count(10, 0, 3) == 4);
  CHECK(part_count(10, 1, 3) == 3);
  CHECK(part_count(10, 2, 3) == 3);
  CHECK(part_count(0, 0, 1) == 0);
}

TEST_CASE("the schedule digest changes with any send time, the process, the rate, the count or the salt") {
  const ArrivalSpec spec{ArrivalProcess::poisson, 100.0, 1.0};
  const auto a = make_schedule(spec, {2s, std::nullopt}, 1).value();
  const auto d = schedule_digest(a);
  CHECK(schedule_digest(a) == d);  // a pure function
  CHECK(schedule_digest(make_schedule(spec, {2s, std::nullopt}, 1).value()) == d);
  CHECK(schedule_digest(make_schedule(spec, {2s, std::nullopt}, 2).value()) != d);
  CHECK(schedule_digest(a, 1) != d);
  auto moved = a;
  moved.send_times[moved.send_times.size() / 2] += Nanos(1);
  CHECK(schedule_digest(moved) != d);
  auto shorter = a;
  shorter.send_times.pop_back();
  CHECK(schedule_digest(shorter) != d);
  auto other_rate = a;
  other_rate.spec.rate_rps = 100.5;
  CHECK(schedule_digest(other_rate) != d);
  auto other_process = a;
  other_process.spec.process = ArrivalProcess::gamma;
  CHECK(schedule_digest(other_process) != d);
}

TEST_CASE("a trace's replay keeps its arrivals exactly, scaled by its speed, cut at the step's end") {
  const std::vector<Nanos> rows{0ms, 100ms, 100ms, 350ms, 1000ms};
  auto s = replay_schedule(rows, 1.0, false, {5s, std::nullopt}).value();
  CHECK(s.send_times == rows);
  CHECK(s.spec.process == ArrivalProcess::trace);
  CHECK(s.spec.rate_rps == Approx(5 / 5.0));  // the mean over the step
  auto fast = replay_schedule(rows, 2.0, false, {5s, std::nullopt}).value();
  CHECK(fast.send_times == std::vector<Nanos>{0ms, 50ms, 50ms, 175ms, 500ms});
  auto cut = replay_schedule(rows, 1.0, false, {350ms, std::nullopt}).value();
  CHECK(cut.send_times == std::vector<Nanos>{0ms, 100ms, 100ms});  // the row at 350 ms is the step's end
  auto counted = replay_schedule(rows, 1.0, false, {std::nullopt, 2}).value();
  CHECK(counted.send_times == std::vector<Nanos>{0ms, 100ms});
}

TEST_CASE("a looped trace starts again one mean gap after its last row, until the step ends") {
  const std::vector<Nanos> rows{0ms, 200ms, 400ms};  // span 400 ms, mean gap 200 ms: period 600 ms
  auto s = replay_schedule(rows, 1.0, true, {1500ms, std::nullopt}).value();
  CHECK(s.send_times == std::vector<Nanos>{0ms, 200ms, 400ms, 600ms, 800ms, 1000ms, 1200ms, 1400ms});
  // Request k of loop l is row k: the index modulo the rows (8 requests: rows 0 1 2 0 1 2 0 1).
  auto counted = replay_schedule(rows, 2.0, true, {std::nullopt, 5}).value();
  CHECK(counted.send_times == std::vector<Nanos>{0ms, 100ms, 200ms, 300ms, 400ms});
}

TEST_CASE("a replay's bad parameters are errors naming them") {
  const std::vector<Nanos> rows{0ms, 10ms};
  CHECK(replay_schedule({}, 1.0, false, {1s, std::nullopt}).error().field == "/workload/dataset");
  CHECK(replay_schedule(rows, 0.0, false, {1s, std::nullopt}).error().field == "/speed");
  CHECK(replay_schedule(rows, std::numeric_limits<double>::infinity(), false, {1s, std::nullopt}).error().field ==
        "/speed");
  CHECK(replay_schedule({5ms, 5ms}, 1.0, true, {1s, std::nullopt}).error().field == "/loop");
  CHECK_FALSE(replay_schedule(rows, 1.0, false, {}).has_value());
  // A row a slow replay would send past a year from its start: refused, never an overflow.
  CHECK(replay_schedule({0ms, 10'000'000'000ms}, 1e-6, false, {std::nullopt, 2}).error().field == "/speed");
  CHECK(replay_schedule({0ms, 10'000'000'000ms}, 1.0, false, {std::nullopt, 2}).value().send_times.back() ==
        10'000'000'000ms);
  CHECK(parse_arrival_process("trace", "/p").value() == ArrivalProcess::trace);
  CHECK(make_schedule({.process = ArrivalProcess::trace}, {1s, std::nullopt}, 1).error().field == "/process");
}

TEST_CASE("a trace scaled to a rate loops at the speed that makes its rows per period that rate") {
  const std::vector<Nanos> rows{0ms, 100ms, 100ms, 400ms};  // span 400 ms, mean gap 133 ms: 4 rows a 533 ms period
  CHECK(trace_rate(rows) == Approx(4 / (0.4 + 0.4 / 3)));
  auto s = replay_at_rate(rows, 30, {10s, std::nullopt}).value();
  CHECK(s.spec.process == ArrivalProcess::trace);
  CHECK(s.spec.loop);
  CHECK(s.spec.speed == Approx(30 / trace_rate(rows)));
  // Whole loops in 10 s at 30 req/s: 75 periods of 4 rows; the trace's shape kept in each.
  CHECK(s.send_times.size() == 300);
  CHECK(s.spec.rate_rps == Approx(30).epsilon(0.01));
  const double gap = to_s(s.send_times[3] - s.send_times[2]);
  CHECK(to_s(s.send_times[1] - s.send_times[0]) == Approx(gap / 3).margin(1e-6));  // 100 ms vs 300 ms, scaled
  CHECK(s.send_times[1] == s.send_times[2]);                                       // rows at one time stay at one
  // The same rate from a trace twice as slow: the same schedule.
  const std::vector<Nanos> slow{0ms, 200ms, 200ms, 800ms};
  CHECK(replay_at_rate(slow, 30, {10s, std::nullopt}).value().send_times == s.send_times);
}

TEST_CASE("a trace scaled to a rate: errors for a bad rate and for rows at one time") {
  CHECK(trace_rate({}) == 0);
  CHECK(trace_rate({5ms}) == 0);
  CHECK(trace_rate({5ms, 5ms}) == 0);
  CHECK(replay_at_rate({0ms, 10ms}, 0, {1s, std::nullopt}).error().field == "/rate_rps");
  CHECK(replay_at_rate({0ms, 10ms}, std::nan(""), {1s, std::nullopt}).error().field == "/rate_rps");
  CHECK(replay_at_rate({5ms, 5ms}, 10, {1s, std::nullopt}).error().field == "/workload/dataset");
  CHECK(replay_at_rate({}, 10, {1s, std::nullopt}).error().field == "/workload/dataset");
}

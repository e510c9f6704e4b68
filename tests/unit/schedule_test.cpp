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

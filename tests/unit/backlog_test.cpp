#include "core/backlog.hpp"

#include <catch2/catch.hpp>

#include "core/random.hpp"

using namespace capsweep;
using namespace std::chrono_literals;

namespace {
Nanos secs(double s) {
  return Nanos(static_cast<Nanos::rep>(s * 1e9));
}
}  // namespace

TEST_CASE("backlog: a steady stream of fixed-length requests does not grow") {
  // 10 req/s, each staying 1.5 s: 15 in flight on average, flat.
  std::vector<std::pair<Nanos, std::optional<Nanos>>> stays;
  for (int i = 0; i < 600; ++i) stays.emplace_back(secs(i * 0.1), secs(i * 0.1 + 1.5));
  auto t = backlog_trend(stays, 10s, 50s);
  CHECK(t.mean_in_flight == Approx(15).epsilon(0.01));
  CHECK(t.slope_per_s == Approx(0).margin(0.01));
  CHECK_FALSE(t.growing);
}

TEST_CASE("backlog: arrivals faster than service grow the backlog at their difference") {
  // 10 req/s offered, one FIFO server finishing one every 0.2 s (5/s): +5 in flight per second.
  std::vector<std::pair<Nanos, std::optional<Nanos>>> stays;
  double free_at = 0;
  for (int i = 0; i < 400; ++i) {
    const double arrive = i * 0.1;
    const double done = std::max(arrive, free_at) + 0.2;
    free_at = done;
    stays.emplace_back(secs(arrive), done <= 40 ? std::optional<Nanos>(secs(done)) : std::nullopt);
  }
  auto t = backlog_trend(stays, 5s, 40s);
  CHECK(t.slope_per_s == Approx(5).epsilon(0.05));
  CHECK(t.growth == Approx(175).epsilon(0.05));
  CHECK(t.growing);
}

TEST_CASE("backlog: Poisson noise around a stable level is not mistaken for growth") {
  int false_alarms = 0;
  for (std::uint64_t seed = 1; seed <= 50; ++seed) {
    Rng rng(seed);
    std::vector<std::pair<Nanos, std::optional<Nanos>>> stays;
    double t = 0;
    while (t < 70) {
      t += rng.exponential() / 8;                                      // 8 req/s
      stays.emplace_back(secs(t), secs(t + 0.5 + rng.exponential()));  // mean stay 1.5 s
    }
    if (backlog_trend(stays, 10s, 60s).growing) ++false_alarms;
  }
  CHECK(false_alarms <= 2);  // 3 standard errors: about 0.1% each, allowing for correlation
}

TEST_CASE("backlog: an empty or degenerate window reports nothing") {
  CHECK_FALSE(backlog_trend({}, 0s, 10s).growing);
  CHECK(backlog_trend({{0s, 5s}}, 10s, 10s).mean_in_flight == 0);
}

TEST_CASE("backlog: a short window over long stays (correlated slots) raises no false alarm") {
  // A 6-s window cut in 20 slots while a request stays 1.5 s on average: neighbouring slots
  // share most of their requests, so the residuals are strongly autocorrelated and a naive
  // standard error is several times too small.
  int false_alarms = 0;
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    Rng rng(seed);
    std::vector<std::pair<Nanos, std::optional<Nanos>>> stays;
    double t = 0;
    while (t < 12) {
      t += rng.exponential() / 20;  // 20 req/s
      stays.emplace_back(secs(t), secs(t + 0.5 + rng.exponential()));
    }
    if (backlog_trend(stays, 4s, 10s).growing) ++false_alarms;
  }
  CHECK(false_alarms <= 3);
}

TEST_CASE("backlog: a 10% overload is found over a 60-s window") {
  // A server of fixed capacity 20/s (FIFO, 32 slots of 1.6 s) offered 22 req/s (Poisson).
  int found = 0;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    std::vector<std::pair<Nanos, std::optional<Nanos>>> stays;
    std::vector<double> free_at(32, 0.0);
    double t = 0;
    while (t < 70) {
      t += rng.exponential() / 22;
      auto slot = std::min_element(free_at.begin(), free_at.end());
      const double done = std::max(t, *slot) + 1.6;
      *slot = done;
      stays.emplace_back(secs(t), done <= 70 ? std::optional<Nanos>(secs(done)) : std::nullopt);
    }
    if (backlog_trend(stays, 10s, 70s).growing) ++found;
  }
  CHECK(found >= 18);
}

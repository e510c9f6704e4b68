#include "core/backlog.hpp"
#include "core/random.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;
using namespace std::chrono_literals;

namespace {
Nanos secs(double s) { return Nanos(static_cast<Nanos::rep>(s * 1e9)); }
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
      t += rng.exponential() / 8;  // 8 req/s
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

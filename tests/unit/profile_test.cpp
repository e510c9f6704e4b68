// Time-varying load profiles: the integrated rate, its inverse, and arrivals that follow the
// profile (counted per window against the expected number).
#include "core/profile.hpp"

#include <catch2/catch.hpp>
#include <cmath>

using namespace capsweep;
using namespace std::chrono_literals;

namespace {

ProfileSegment flat(double rate, Nanos d) {
  return {d, rate, rate, 0, Nanos{0}};
}
ProfileSegment ramp(double from, double to, Nanos d) {
  return {d, from, to, 0, Nanos{0}};
}

std::size_t count_in(const Schedule& s, Nanos from, Nanos to) {
  return static_cast<std::size_t>(
      std::count_if(s.send_times.begin(), s.send_times.end(), [&](Nanos t) { return t >= from && t < to; }));
}

}  // namespace

TEST_CASE("profile: the integrated rate of flat, ramped and oscillating segments, and its inverse") {
  const auto p =
      Profile::make({flat(10, 60s), ramp(0, 10, 10s), flat(0, 5s), ProfileSegment{20s, 6, 6, 4, 10s}}).value();
  CHECK(p.duration() == 95s);
  CHECK(p.expected_before(60s) == Approx(600));
  CHECK(p.expected_before(70s) == Approx(650));       // + the ramp's triangle
  CHECK(p.expected_before(75s) == Approx(650));       // idle
  CHECK(p.expected_total() == Approx(650 + 6 * 20));  // whole periods of the oscillation add nothing
  CHECK(p.rate_at(65s) == Approx(5));
  CHECK(p.rate_at(72s) == 0);
  CHECK(p.rate_at(75s + 2500ms) == Approx(10));  // 6 + 4 sin(pi / 2)
  CHECK(p.rate_at(100s) == 0);
  for (double u : {1.0, 300.0, 600.5, 649.0, 651.0, 700.0}) {
    INFO(u);
    CHECK(p.expected_before(p.time_of(u)) == Approx(u).margin(1e-6));
  }
  CHECK(p.time_of(650.5) > 75s);  // past the idle segment
}

TEST_CASE("profile: segments are checked and the errors name the field") {
  CHECK(Profile::make({}).error().field == "/profile");
  CHECK(Profile::make({flat(1, 0s)}).error().field == "/profile/0/duration_s");
  CHECK(Profile::make({flat(1, 1s), flat(-1, 1s)}).error().field == "/profile/1/rate_rps");
  CHECK(Profile::make({ProfileSegment{10s, 2, 5, 3, 5s}}).error().field == "/profile/0/oscillate");
  CHECK(Profile::make({ProfileSegment{10s, 5, 5, 1, 0s}}).error().field == "/profile/0/oscillate/period_s");
  CHECK(Profile::make({flat(std::nan(""), 1s)}).error().field == "/profile/0/rate_rps");
}

TEST_CASE("profile: Poisson arrivals follow a ramp window by window") {
  // 0 -> 40 req/s over 100 s: 2,000 expected, 1/4 of them in the first half.
  const auto p = Profile::make({ramp(0, 40, 100s)}).value();
  const auto s = profile_schedule(p, ArrivalProcess::poisson, 1, 7).value();
  const double n = static_cast<double>(s.send_times.size());
  CHECK(std::fabs(n - 2000) < 4 * std::sqrt(2000.0));
  for (int w = 0; w < 10; ++w) {
    const Nanos from = 10s * w, to = 10s * (w + 1);
    const double expected = p.expected_before(to) - p.expected_before(from);
    INFO("window " << w << ": " << count_in(s, from, to) << " vs " << expected);
    CHECK(std::fabs(static_cast<double>(count_in(s, from, to)) - expected) < 4 * std::sqrt(expected) + 1);
  }
  CHECK(std::is_sorted(s.send_times.begin(), s.send_times.end()));
  // The same seed, the same schedule.
  CHECK(profile_schedule(p, ArrivalProcess::poisson, 1, 7).value().send_times == s.send_times);
}

TEST_CASE("profile: constant arrivals are evenly spaced at the instantaneous rate - gamma keeps the mean") {
  const auto p = Profile::make({flat(10, 10s), flat(0, 10s), flat(20, 10s)}).value();
  const auto c = profile_schedule(p, ArrivalProcess::constant, 1, 1).value();
  CHECK(count_in(c, 0s, 10s) == 100);
  CHECK(count_in(c, 10s, 20s) == 0);
  CHECK(count_in(c, 20s, 30s) == 200);
  CHECK(c.send_times[1] - c.send_times[0] == 100ms);
  const auto g = profile_schedule(Profile::make({flat(50, 100s)}).value(), ArrivalProcess::gamma, 0.25, 3).value();
  CHECK(std::fabs(static_cast<double>(g.send_times.size()) - 5000) < 8 * std::sqrt(5000.0 / 0.25));
}

TEST_CASE("profile: all_at_once has no rate, and a profile past the request limit is refused") {
  const auto p = Profile::make({flat(10, 10s)}).value();
  CHECK(profile_schedule(p, ArrivalProcess::all_at_once, 1, 1).error().field == "/arrival/process");
  CHECK(profile_schedule(p, ArrivalProcess::poisson, 1, 1, 50).error().field == "/profile");
  CHECK(profile_schedule(p, ArrivalProcess::gamma, 0, 1).error().field == "/arrival/burstiness");
}

TEST_CASE("profile: a trace follows the profile's rate and keeps its own bursts") {
  // Bursts of 3 at one instant 300 ms apart, looped one mean gap (75 ms) after the last.
  const std::vector<Nanos> rows{0ms, 0ms, 0ms, 300ms, 300ms, 300ms, 600ms, 600ms, 600ms};
  const auto p = Profile::make({flat(20, 10s), flat(0, 5s), ramp(20, 60, 10s)}).value();
  const auto s = profile_replay(p, rows).value();
  CHECK(s.spec.process == ArrivalProcess::trace);
  CHECK(static_cast<double>(s.send_times.size()) == Approx(p.expected_total()).margin(3));
  for (Nanos from : {0s, 5s, 15s, 20s}) {
    const double expected = p.expected_before(from + 5s) - p.expected_before(from);
    INFO("window from " << to_s(from) << " s: " << count_in(s, from, from + 5s) << " vs " << expected);
    CHECK(std::fabs(static_cast<double>(count_in(s, from, from + 5s)) - expected) <= 5);
  }
  CHECK(count_in(s, 10s, 15s) == 0);
  // The trace's bursts stay bursts: every third request shares the time of the two before it.
  for (std::size_t k = 0; k + 2 < s.send_times.size(); k += 3) {
    CHECK(s.send_times[k] == s.send_times[k + 1]);
    CHECK(s.send_times[k] == s.send_times[k + 2]);
  }
  CHECK(std::is_sorted(s.send_times.begin(), s.send_times.end()));
}

TEST_CASE("profile: a trace that cannot loop, and one past the request limit, are refused") {
  const auto p = Profile::make({flat(10, 10s)}).value();
  CHECK(profile_replay(p, {5ms, 5ms}).error().field == "/workload/dataset");
  CHECK(profile_replay(p, {}).error().field == "/workload/dataset");
  CHECK(profile_replay(p, {0ms, 100ms}, 50).error().field == "/profile");
}

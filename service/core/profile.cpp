#include "core/profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/random.hpp"

namespace capsweep {

namespace {

constexpr double kTwoPi = 2 * std::numbers::pi;

}  // namespace

Result<Profile> Profile::make(std::vector<ProfileSegment> segments) {
  if (segments.empty()) return invalid("/profile", "needs at least one segment");
  Profile p;
  double expected = 0;
  Nanos start{0};
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const ProfileSegment& s = segments[i];
    const std::string f = fmt::format("/profile/{}", i);
    if (s.duration <= Nanos{0}) return invalid(f + "/duration_s", "must be positive");
    for (double r : {s.rate_rps, s.to_rate_rps}) {
      if (!std::isfinite(r) || r < 0) return invalid(f + "/rate_rps", "must be a rate >= 0");
    }
    if (s.amplitude_rps != 0) {
      if (!std::isfinite(s.amplitude_rps) || s.amplitude_rps < 0) {
        return invalid(f + "/oscillate/amplitude_rps", "must be a rate >= 0");
      }
      if (s.period <= Nanos{0}) return invalid(f + "/oscillate/period_s", "must be positive");
      if (s.amplitude_rps > std::min(s.rate_rps, s.to_rate_rps) + 1e-9) {
        return invalid(f + "/oscillate",
                       "the amplitude may not exceed the lowest rate of its segment (the rate would go below zero)");
      }
    }
    p.starts_.push_back(start);
    p.expected_at_start_.push_back(expected);
    p.segments_.push_back(s);
    expected += p.segment_expected(i, to_s(s.duration));
    start += s.duration;
  }
  p.total_ = start;
  return p;
}

// ∫₀ᵗ rate of segment i: the linear part, and the oscillation's integral.
double Profile::segment_expected(std::size_t i, double t) const noexcept {
  const ProfileSegment& s = segments_[i];
  const double d = to_s(s.duration);
  const double slope = (s.to_rate_rps - s.rate_rps) / d;
  double v = s.rate_rps * t + slope * t * t / 2;
  if (s.amplitude_rps > 0) {
    const double period = to_s(s.period);
    v += s.amplitude_rps * period / kTwoPi * (1 - std::cos(kTwoPi * t / period));
  }
  return std::max(v, 0.0);
}

double Profile::rate_at(Nanos t) const noexcept {
  if (t < Nanos{0} || t >= total_) return 0;
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), t);
  const std::size_t i = static_cast<std::size_t>(it - starts_.begin()) - 1;
  const ProfileSegment& s = segments_[i];
  const double x = to_s(t - starts_[i]);
  double r = s.rate_rps + (s.to_rate_rps - s.rate_rps) * x / to_s(s.duration);
  if (s.amplitude_rps > 0) r += s.amplitude_rps * std::sin(kTwoPi * x / to_s(s.period));
  return std::max(r, 0.0);
}

double Profile::expected_before(Nanos t) const noexcept {
  if (t <= Nanos{0}) return 0;
  if (t >= total_) t = total_;
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), t);
  const std::size_t i = static_cast<std::size_t>(it - starts_.begin()) - 1;  // t > 0 = starts_[0]
  return expected_at_start_[i] + segment_expected(i, to_s(t - starts_[i]));
}

Nanos Profile::time_of(double u) const noexcept {
  if (u <= 0) return Nanos{0};
  // The segment where Λ crosses u, then bisection inside it (Λ is non-decreasing).
  const auto it = std::upper_bound(expected_at_start_.begin(), expected_at_start_.end(), u);
  std::size_t i = static_cast<std::size_t>(it - expected_at_start_.begin());
  i = i == 0 ? 0 : i - 1;
  double lo = 0, hi = to_s(segments_[i].duration);
  const double target = u - expected_at_start_[i];
  if (segment_expected(i, hi) < target) return total_;
  for (int k = 0; k < 60 && hi - lo > 1e-10; ++k) {
    const double mid = (lo + hi) / 2;
    (segment_expected(i, mid) < target ? lo : hi) = mid;
  }
  return starts_[i] + std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(hi));
}

Result<Schedule> profile_schedule(const Profile& profile, ArrivalProcess process, double burstiness, std::uint64_t seed,
                                  std::uint64_t max_requests) {
  const ArrivalRow& row = arrival_row(process);
  if (row.shape == ArrivalRow::Shape::burst) {
    return invalid("/arrival/process", "a profile's rate varies in time: all_at_once has no rate");
  }
  if (auto e = check_burstiness(row, burstiness, "/arrival/burstiness")) return *e;
  const double total = profile.expected_total();
  if (total > static_cast<double>(max_requests) * 1.1 + 100) {
    return invalid("/profile",
                   fmt::format("the profile offers about {:.0f} requests; the limit is {}", total, max_requests));
  }
  Schedule s;
  s.spec.process = process;
  s.spec.burstiness = burstiness;
  s.spec.rate_rps = total / std::max(to_s(profile.duration()), 1e-9);  // the mean rate
  Rng rng(seed);
  s.send_times.reserve(static_cast<std::size_t>(total * 1.05) + 16);
  // Operational time: unit-rate gaps of the chosen renewal process. The first arrival of a
  // constant process comes at u = 0.5, as a stationary one would place it.
  const bool drawn = row.shape == ArrivalRow::Shape::renewal && !row.grid;
  double u = row.grid ? 0.5 : 0;
  while (true) {
    if (drawn)
      u += row.gap(rng, burstiness, 1.0);
    else if (!s.send_times.empty())
      u += 1;
    if (u >= total) break;
    if (s.send_times.size() >= max_requests) {
      return invalid("/profile", fmt::format("the profile offers more than {} requests", max_requests));
    }
    s.send_times.push_back(profile.time_of(u));
  }
  return s;
}

Result<Schedule> profile_replay(const Profile& profile, const std::vector<Nanos>& offsets, std::uint64_t max_requests) {
  const double own = trace_rate(offsets);
  if (!(own > 0)) {
    return invalid("/workload/dataset", "the trace's rows all share one time: it has no rate to follow the profile");
  }
  const double total = profile.expected_total();
  if (total > static_cast<double>(max_requests) * 1.1 + 100) {
    return invalid("/profile",
                   fmt::format("the profile offers about {:.0f} requests; the limit is {}", total, max_requests));
  }
  const Nanos span = offsets.back() - offsets.front();
  const double period_s = to_s(span + span / static_cast<Nanos::rep>(offsets.size() - 1));
  Schedule s;
  s.spec.process = ArrivalProcess::trace;
  s.spec.rate_rps = total / std::max(to_s(profile.duration()), 1e-9);  // the mean rate
  s.send_times.reserve(static_cast<std::size_t>(total) + 16);
  for (std::uint64_t l = 0;; ++l) {
    for (const Nanos t : offsets) {
      // Operational time: the trace's time at its own rate of one request per unit.
      const double u = (to_s(t - offsets.front()) + period_s * static_cast<double>(l)) * own;
      if (u >= total) return s;
      if (s.send_times.size() >= max_requests) {
        return invalid("/profile", fmt::format("the profile offers more than {} requests", max_requests));
      }
      s.send_times.push_back(profile.time_of(u));
    }
  }
}

}  // namespace capsweep

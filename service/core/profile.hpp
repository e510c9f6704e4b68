#pragma once
// A load profile that varies in time (scenario jobs): segments of a fixed rate, a linear ramp,
// or a rate oscillating around either, and the arrivals over the whole profile generated in
// full from a seed. Arrivals are a renewal process in "operational time" u = Λ(t), the
// integrated rate, mapped back through Λ⁻¹ (time rescaling): unit-rate exponential gaps give
// the non-homogeneous Poisson process, gamma gaps of shape b its burstier kin, unit gaps
// evenly spaced arrivals at the instantaneous rate. Pure.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "core/schedule.hpp"
#include "core/time.hpp"

namespace capsweep {

struct ProfileSegment {
  Nanos duration{0};
  double rate_rps = 0;     // at the segment's start
  double to_rate_rps = 0;  // at its end (= rate_rps: flat)
  // An oscillation added to the rate: amplitude · sin(2π t / period), t from the segment's start.
  double amplitude_rps = 0;
  Nanos period{0};
};

class Profile {
 public:
  // Checks each segment: a positive duration, rates >= 0 and finite, an oscillation with a
  // positive period and an amplitude no larger than the lowest rate it rides on (the rate
  // never goes below zero). Errors name "/profile/<i>/<field>".
  static Result<Profile> make(std::vector<ProfileSegment> segments);

  Nanos duration() const noexcept { return total_; }
  // The offered rate at time t (0 outside the profile).
  double rate_at(Nanos t) const noexcept;
  // Λ(t): the requests expected in [0, t).
  double expected_before(Nanos t) const noexcept;
  double expected_total() const noexcept { return expected_before(total_); }
  // The time at which Λ reaches u (u within [0, expected_total()]); the first such time.
  Nanos time_of(double u) const noexcept;
  const std::vector<ProfileSegment>& segments() const noexcept { return segments_; }
  // The start of segment i.
  Nanos start_of(std::size_t i) const noexcept { return starts_[i]; }

 private:
  std::vector<ProfileSegment> segments_;
  std::vector<Nanos> starts_;
  std::vector<double> expected_at_start_;  // Λ at each segment's start
  Nanos total_{0};
  double segment_expected(std::size_t i, double t_s) const noexcept;
};

// The send times over the whole profile (process constant, poisson or gamma with
// `burstiness`), at most `max_requests` (more is an error at "/profile").
Result<Schedule> profile_schedule(const Profile& profile, ArrivalProcess process, double burstiness, std::uint64_t seed,
                                  std::uint64_t max_requests = kMaxScheduledRequests);

// A trace's arrivals following the profile: the trace looped (as replay_schedule loops it) and
// its times scaled to a mean rate of one (operational time), request k sent when Λ reaches its
// time, so the trace's bursts and gaps are kept and the rate is the profile's; request k is row
// k mod rows. Errors: a trace that cannot loop ("/workload/dataset"), more than `max_requests`
// ("/profile").
Result<Schedule> profile_replay(const Profile& profile, const std::vector<Nanos>& offsets,
                                std::uint64_t max_requests = kMaxScheduledRequests);

}  // namespace capsweep

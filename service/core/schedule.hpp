#pragma once
// Arrival schedules: a step's send times, generated in full from a seed before the step
// starts, so a step is reproducible and the generator never decides timing on the fly.

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/time.hpp"

namespace capsweep {

enum class ArrivalProcess {
  constant,     // evenly spaced, gap 1/rate
  poisson,      // exponential gaps, mean 1/rate
  gamma,        // gamma gaps with shape b (burstiness) and mean 1/rate; b=1 is Poisson
  all_at_once,  // every request at time zero (infinite rate); needs a count
};

std::string_view to_string(ArrivalProcess p) noexcept;
// Parses "constant", "poisson", "gamma" or "all_at_once"; the error names `field`.
Result<ArrivalProcess> parse_arrival_process(std::string_view text, const std::string& field);

struct ArrivalSpec {
  ArrivalProcess process = ArrivalProcess::poisson;
  double rate_rps = 1.0;    // requests per second; ignored for all_at_once
  double burstiness = 1.0;  // gamma shape b; used by gamma only
};

// How long a schedule runs: send times fall in [0, duration) and/or number at most
// `count`; at least one must be given.
struct ScheduleLimit {
  std::optional<Nanos> duration;
  std::optional<std::uint64_t> count;
};

// The largest schedule we generate (guards memory against absurd rate x duration).
inline constexpr std::uint64_t kMaxScheduledRequests = 10'000'000;

// Send times as offsets from the step's origin, non-decreasing.
struct Schedule {
  ArrivalSpec spec;
  std::vector<Nanos> send_times;
};

// Generates a schedule. Errors (fields relative to the arrival object): rate <= 0 or not
// finite ("/rate_rps"), burstiness <= 0 or not finite ("/burstiness"), no limit, or a
// limit that would exceed kMaxScheduledRequests.
Result<Schedule> make_schedule(const ArrivalSpec& spec, const ScheduleLimit& limit, std::uint64_t seed);

}  // namespace capsweep

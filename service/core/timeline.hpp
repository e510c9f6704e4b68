#pragma once
// A step over time: fixed-width bins of what was sent, what finished, what was in flight and
// how long the first token took, for a check's report ("latency and in flight over time").
// Pure: plain request times in, bins out.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <vector>

namespace capsweep {

// One request, times in seconds from the step's origin; NaN where it has none (never sent,
// never finished, no first token).
struct TimelineRequest {
  double scheduled_s = 0, sent_s = 0, finished_s = 0;
  double ttft_ms = 0;
  bool ok = false;
};

struct TimelineBin {
  double t_start_s = 0;                     // the bin is [t_start_s, t_start_s + width)
  std::uint64_t scheduled = 0;              // requests scheduled in the bin
  std::uint64_t completed = 0;              // requests finishing in it successfully
  std::uint64_t failed = 0;                 // requests finishing in it otherwise
  std::uint64_t in_flight = 0;              // sent and not finished at the bin's end
  double p50_ttft_ms = 0, p95_ttft_ms = 0;  // of requests scheduled in the bin (NaN: none)
};

// Bins of `width_s` (> 0) covering [0, end_s); requests outside are left out of the counts
// of bins but still counted in flight while they are.
std::vector<TimelineBin> timeline(std::span<const TimelineRequest> requests, double width_s, double end_s);
// A bin width that gives at most `max_bins` bins over `duration_s`: 1, 2, 5, 10, 15, 30, 60 s
// or a multiple of 60.
double timeline_width(double duration_s, std::size_t max_bins = 120);
// {"width_s", "bins": [{"t_s", "scheduled", "completed", "failed", "in_flight", "p50_ttft_ms",
// "p95_ttft_ms"}, ...]} (latencies null where a bin had none).
nlohmann::json timeline_json(const std::vector<TimelineBin>& bins, double width_s);

}  // namespace capsweep

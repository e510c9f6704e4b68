#pragma once
// The time slices of a scenario job: every `window` a row of what the load did and what the
// users saw, computed incrementally as requests end (the cost of a window is proportional to
// its requests; nothing of a closed window is kept). A request belongs to the window of its
// scheduled time for its latencies and its outcome; completions, tokens and inter-token gaps
// count in the window where they happened. A window is closed once the requests scheduled
// in it have all ended, or one window later at the latest: then a request still in flight
// counts with its TTFT when its first token came, else with the time it has waited so far (a
// lower bound of its TTFT), and one not even in flight yet (queued before it was sent) with
// the time since the window's end; what it does after that is not counted in the closed window.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/metrics.hpp"
#include "core/record.hpp"
#include "core/stats.hpp"
#include "core/time.hpp"

namespace capsweep {

struct WindowRow {
  int index = 0;
  double t_start_s = 0;
  double offered_rps = 0;       // the profile's rate over the window (expected arrivals / window)
  std::uint64_t scheduled = 0;  // requests scheduled in the window
  std::uint64_t sent = 0;       // of those, sent
  std::uint64_t completed = 0;  // successful completions in the window
  std::uint64_t good = 0;       // of those, good (every goodput bound held)
  std::uint64_t in_flight = 0;  // requests sent and not ended at the window's end
  std::optional<double> p50_ttft_ms, p95_ttft_ms, p99_ttft_ms, max_ttft_ms;  // requests scheduled in it
  std::optional<double> p95_itl_ms;                                          // gaps that ended in it
  std::uint64_t ttft_censored = 0;  // requests still waiting for a first token when it closed
  // Requests scheduled in it that failed, by outcome; of those, fast rejections (a 4xx, or a
  // 5xx answered within 250 ms) and streams cut (a stream error, or still running at the end).
  std::array<std::uint64_t, kOutcomeCount> errors{};
  std::uint64_t rejected = 0, cut = 0;
  double goodput_rps = 0;
  // The TTFTs as a histogram of 1%-wide logarithmic buckets (index, count), so that windows
  // pool into percentiles within 1% (pooled_ttft_percentile).
  std::vector<std::pair<int, std::uint32_t>> ttft_histogram;
};

// A row as stored and shown: {"index", "t_start_s", "offered_rps", "scheduled", "sent",
// "completed", "good", "in_flight", "p50_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "max_ttft_ms",
// "p95_itl_ms", "ttft_censored", "errors": {"connect": n, ...}, "rejected", "cut",
// "goodput_rps", "ttft_histogram": [[bucket, count], ...]}; and back (absent keys as zero).
nlohmann::json window_json(const WindowRow& row);
WindowRow window_from_json(const nlohmann::json& j);

// The q-th percentile (nearest rank) of the TTFTs of several windows, within 1%.
std::optional<double> pooled_ttft_percentile(const std::vector<const WindowRow*>& rows, double q);

// One request as a readiness judgement reads it: when it was scheduled, its TTFT from the
// schedule (none when no token came), how it ended, and whether it was a fast refusal (a 4xx,
// or a 5xx answered within 250 ms: a target saying "not ready", which is honest).
struct RequestSample {
  double scheduled_s = 0;
  std::optional<double> ttft_ms;
  Outcome outcome = Outcome::ok;
  bool rejected = false;
};

// The earliest `per_bucket` requests (by scheduled time) of every `bucket` of a step: enough to
// list the first requests after any moment, in memory bounded by the rate (a bucket that saw
// more keeps its earliest and says it dropped some). A long step keeps only the ranges it was
// asked to keep (after each moment to judge) and its recent past: forget_before() drops the
// rest and takes no more of it.
class EarliestRequests {
 public:
  explicit EarliestRequests(Nanos bucket = std::chrono::milliseconds(100), std::size_t per_bucket = 8);
  void add(const RequestSample& s);
  // Keeps what is scheduled in [from_s, to_s), however late it ends.
  void keep(double from_s, double to_s);
  // Drops what was scheduled before t_s outside the kept ranges, and takes no more of it.
  void forget_before(double t_s);
  std::size_t buckets() const noexcept { return buckets_.size(); }
  // The kept requests scheduled in [from_s, to_s), in schedule order.
  std::vector<RequestSample> between(double from_s, double to_s) const;
  // Whether a bucket overlapping [from_s, to_s) dropped requests (the list is a sample).
  bool dropped_between(double from_s, double to_s) const;

 private:
  struct Bucket {
    std::vector<RequestSample> kept;
    bool dropped = false;
  };
  std::int64_t bucket_of(double t_s) const;
  bool kept(double from_s, double to_s) const;  // overlaps a kept range
  double bucket_s_;
  std::size_t per_bucket_;
  std::map<std::int64_t, Bucket> buckets_;
  std::vector<std::pair<double, double>> keep_;
  double floor_s_ = -1e300;
};

// A request in flight when a window closes: its scheduled time and, once it came, its first
// token's (a TTFT is known before the request ends).
struct LiveRequest {
  Nanos scheduled{0};
  std::optional<Nanos> first_token;
};

class WindowAccumulator {
 public:
  // `goodput`: the per-request bounds that make a request good (the SLO's).
  WindowAccumulator(Nanos window, Nanos total, GoodputBounds goodput);

  // A request of the scenario was scheduled (counted in its window).
  void on_scheduled(Nanos scheduled);
  // A request ended (its record is final): latencies to its scheduled window, completion and
  // gaps to the windows where they happened (those still open).
  void on_ended(const RequestRecord& rec, bool fast_rejection);
  // Rows of the windows that close by `now` (see the header), in order; `in_flight` is the
  // number of requests in flight now, `live` those requests, `expected(from, to)` the
  // profile's expected arrivals. With `final`, every window left is closed (the scenario ended).
  std::vector<WindowRow> take_closed(Nanos now, std::uint64_t in_flight, const std::vector<LiveRequest>& live,
                                     const std::function<double(Nanos, Nanos)>& expected, bool final = false);

  int windows() const noexcept { return static_cast<int>(slots_.size()); }
  Nanos window() const noexcept { return window_; }

 private:
  struct Slot {
    std::uint64_t scheduled = 0, ended = 0, sent = 0, completed = 0, good = 0, rejected = 0, cut = 0;
    std::vector<double> ttft_ms, itl_ms;
    std::array<std::uint64_t, kOutcomeCount> errors{};
    std::uint64_t in_flight_at_end = 0;
    bool in_flight_seen = false;
  };
  int slot_of(Nanos t) const noexcept;
  Nanos window_;
  Nanos total_;
  GoodputBounds goodput_;
  std::vector<Slot> slots_;
  int next_ = 0;  // the first window not yet taken
};

}  // namespace capsweep

#pragma once
// The time slices of a scenario job: every `window` a row of what the load did and what the
// users saw, computed incrementally as requests end (the cost of a window is proportional to
// its requests; nothing of a closed window is kept). A request belongs to the window of its
// scheduled time for its latencies and its outcome; completions, tokens and inter-token gaps
// count in the window where they happened. A window is closed once the requests scheduled
// in it have all ended, or one window later at the latest (then the requests still waiting
// for a first token count with the time they have waited so far: a lower bound of their TTFT).

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

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
  std::optional<double> p50_ttft_ms, p95_ttft_ms, p99_ttft_ms;  // of requests scheduled in it
  std::optional<double> p95_itl_ms;                             // of gaps that ended in it
  std::uint64_t ttft_censored = 0;                    // requests still waiting for a first token when it closed
  std::array<std::uint64_t, kOutcomeCount> errors{};  // requests scheduled in it, by failed outcome
  std::uint64_t rejected = 0;                         // of the errors: fast rejections (429 / 503 answered at once)
  double goodput_rps = 0;
};

// Per-request bounds that make a request good (ms; absent: no bound), as in the SLO's goodput.
struct WindowGoodput {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
};

class WindowAccumulator {
 public:
  WindowAccumulator(Nanos window, Nanos total, WindowGoodput goodput);

  // A request of the scenario was scheduled (counted in its window).
  void on_scheduled(Nanos scheduled);
  // A request ended (its record is final): latencies to its scheduled window, completion and
  // gaps to the windows where they happened.
  void on_ended(const RequestRecord& rec, bool fast_rejection);
  // Rows of the windows that close by `now` (see the header), in order; `in_flight` is the
  // number of requests in flight now, `waiting_since` the scheduled times of those still
  // waiting for a first token, `expected(from, to)` the profile's expected arrivals.
  // With `final`, every window left is closed (the scenario ended).
  std::vector<WindowRow> take_closed(Nanos now, std::uint64_t in_flight, const std::vector<Nanos>& waiting_since,
                                     const std::function<double(Nanos, Nanos)>& expected, bool final = false);

  int windows() const noexcept { return static_cast<int>(slots_.size()); }
  Nanos window() const noexcept { return window_; }

 private:
  struct Slot {
    std::uint64_t scheduled = 0, ended = 0, sent = 0, completed = 0, good = 0, rejected = 0;
    std::vector<double> ttft_ms, itl_ms;
    std::array<std::uint64_t, kOutcomeCount> errors{};
    std::uint64_t in_flight_at_end = 0;
    bool in_flight_seen = false;
  };
  int slot_of(Nanos t) const noexcept;
  Nanos window_;
  Nanos total_;
  WindowGoodput goodput_;
  std::vector<Slot> slots_;
  int next_ = 0;  // the first window not yet taken
};

}  // namespace capsweep

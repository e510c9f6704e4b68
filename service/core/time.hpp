#pragma once
// Time inside capsweep is std::chrono. A step's events are nanosecond offsets from the
// step's origin (the instant its schedule starts), measured on a steady clock. Plain
// numbers (JSON "*_ms" / "*_s") are converted once, at the edge, by these functions.

#include <chrono>
#include <string>

#include "core/error.hpp"

namespace capsweep {

using SteadyClock = std::chrono::steady_clock;
using Nanos = std::chrono::nanoseconds;
// Seconds as a floating-point duration, for rates and windows.
using SecondsF = std::chrono::duration<double>;

// Converts a JSON number of milliseconds; rejects NaN, infinities and negatives.
Result<Nanos> duration_from_ms(double ms, const std::string& field);
// Converts a JSON number of seconds; rejects NaN, infinities and negatives.
Result<Nanos> duration_from_s(double s, const std::string& field);

// Floating-point milliseconds / seconds of a duration, for reporting at the edge.
constexpr double to_ms(Nanos d) noexcept {
  return static_cast<double>(d.count()) / 1e6;
}
constexpr double to_s(Nanos d) noexcept {
  return static_cast<double>(d.count()) / 1e9;
}

// "2026-12-01T08:00:00.123Z": UTC with milliseconds, the one time stamp format of logs and
// the store.
std::string utc_text(std::chrono::system_clock::time_point when);

}  // namespace capsweep

#include "core/time.hpp"

#include <fmt/format.h>

#include <cmath>
#include <ctime>

namespace capsweep {
namespace {

// Longest duration we accept anywhere: 30 days, far below Nanos' range.
constexpr double kMaxSeconds = 30.0 * 24 * 3600;

Result<Nanos> from_seconds(double s, double shown, const char* unit, const std::string& field) {
  if (std::isnan(shown) || std::isinf(shown)) {
    return invalid(field, fmt::format("must be a finite number of {}", unit));
  }
  if (shown < 0) {
    return invalid(field, fmt::format("must not be negative (got {} {})", shown, unit));
  }
  if (s > kMaxSeconds) {
    return invalid(field, fmt::format("is too large (got {} {}, at most 30 days)", shown, unit));
  }
  return Nanos(static_cast<Nanos::rep>(std::llround(s * 1e9)));
}

}  // namespace

Result<Nanos> duration_from_ms(double ms, const std::string& field) {
  return from_seconds(ms / 1e3, ms, "ms", field);
}

Result<Nanos> duration_from_s(double s, const std::string& field) {
  return from_seconds(s, s, "s", field);
}

std::string utc_text(std::chrono::system_clock::time_point when) {
  const std::time_t t = std::chrono::system_clock::to_time_t(when);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(when.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

}  // namespace capsweep

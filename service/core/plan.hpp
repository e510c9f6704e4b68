#pragma once
// Sweep planning, pure: the ladder of fixed rates between the synchronous rate and the
// throughput probe's rate, the bisection between a passing and a failing rate, and the knee
// of a latency-versus-rate curve.

#include <optional>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace capsweep {

enum class Spacing { linear, geometric };

// K rates strictly between r_sync and r_max: linear r_sync + (r_max - r_sync) * i / (K + 1),
// geometric r_sync * (r_max / r_sync)^(i / (K + 1)), i = 1..K, ascending.
// Errors: r_sync <= 0 ("/r_sync"), r_max <= r_sync ("/r_max"), K < 1 ("/steps").
Result<std::vector<double>> ladder_rates(double r_sync, double r_max, int steps, Spacing spacing);

// The next rate to try between a passing and a failing rate, or nullopt once the bracket is
// within `tolerance` (relative to the passing rate). Precondition: 0 < pass < fail.
std::optional<double> bisect(double pass_rate, double fail_rate, double tolerance);

// The knee of y(x): the breakpoint k of the continuous two-segment fit
//   y = a + b x + c max(0, x - k)
// minimising the squared error, searched over breakpoints leaving at least two points on each
// side. Returns nullopt with fewer than 4 points, or when the second segment does not rise
// more steeply than the first (no knee: latency must start to grow). Points need not be sorted.
struct Knee {
  double x = 0;
  double slope_before = 0;
  double slope_after = 0;
  double sse = 0;
};
std::optional<Knee> fit_knee(std::vector<std::pair<double, double>> points);

}  // namespace capsweep

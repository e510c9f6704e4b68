#include "core/plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace capsweep {

Result<std::vector<double>> ladder_rates(double r_sync, double r_max, int steps, Spacing spacing) {
  if (!std::isfinite(r_sync) || r_sync <= 0) return invalid("/r_sync", "the synchronous rate must be positive");
  if (!std::isfinite(r_max) || r_max <= r_sync) {
    return invalid("/r_max",
                   fmt::format("the throughput rate ({}) must exceed the synchronous rate ({})", r_max, r_sync));
  }
  if (steps < 1) return invalid("/steps", "a ladder needs at least one step");
  std::vector<double> out;
  for (int i = 1; i <= steps; ++i) {
    const double f = static_cast<double>(i) / (steps + 1);
    out.push_back(spacing == Spacing::linear ? r_sync + (r_max - r_sync) * f : r_sync * std::pow(r_max / r_sync, f));
  }
  return out;
}

std::optional<double> bisect(double pass_rate, double fail_rate, double tolerance) {
  if ((fail_rate - pass_rate) / pass_rate <= tolerance) return std::nullopt;
  return (pass_rate + fail_rate) / 2;
}

namespace {

// Least squares of y on [1, x, max(0, x - k)]; returns the coefficients and the SSE, or
// nullopt when the system is singular.
std::optional<std::pair<std::array<double, 3>, double>> hinge_fit(const std::vector<std::pair<double, double>>& p,
                                                                  double k) {
  double m[3][4] = {};
  for (const auto& [x, y] : p) {
    const double f[3] = {1, x, std::max(0.0, x - k)};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) m[r][c] += f[r] * f[c];
      m[r][3] += f[r] * y;
    }
  }
  // Gaussian elimination with partial pivoting.
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::abs(m[r][col]) > std::abs(m[pivot][col])) pivot = r;
    }
    if (std::abs(m[pivot][col]) < 1e-12) return std::nullopt;
    std::swap(m[col], m[pivot]);
    for (int r = 0; r < 3; ++r) {
      if (r == col) continue;
      const double factor = m[r][col] / m[col][col];
      for (int c = col; c < 4; ++c) m[r][c] -= factor * m[col][c];
    }
  }
  std::array<double, 3> beta{m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]};
  double sse = 0;
  for (const auto& [x, y] : p) {
    const double e = y - (beta[0] + beta[1] * x + beta[2] * std::max(0.0, x - k));
    sse += e * e;
  }
  return std::make_pair(beta, sse);
}

}  // namespace

std::optional<Knee> fit_knee(std::vector<std::pair<double, double>> points) {
  if (points.size() < 4) return std::nullopt;
  std::sort(points.begin(), points.end());
  std::optional<Knee> best;
  // Candidates: from the 2nd to the (n-2)th point, with 32 steps inside each interval.
  for (std::size_t i = 1; i + 2 < points.size(); ++i) {
    const double lo = points[i].first, hi = points[i + 1].first;
    for (int s = 0; s < 32; ++s) {
      const double k = lo + (hi - lo) * s / 32.0;
      auto fit = hinge_fit(points, k);
      if (!fit) continue;
      if (!best || fit->second < best->sse) {
        best = Knee{k, fit->first[1], fit->first[1] + fit->first[2], fit->second};
      }
    }
  }
  if (!best || !(best->slope_after > best->slope_before) || !(best->slope_after > 0)) return std::nullopt;
  return best;
}

}  // namespace capsweep

#include "core/backlog.hpp"

#include <algorithm>
#include <cmath>

namespace capsweep {

BacklogTrend backlog_trend(const std::vector<std::pair<Nanos, std::optional<Nanos>>>& stays, Nanos window_start,
                           Nanos window_end, int slots) {
  BacklogTrend t;
  slots = std::max(slots, 3);
  const double w0 = to_s(window_start), w1 = to_s(window_end);
  if (!(w1 > w0)) return t;
  const double width = (w1 - w0) / slots;
  std::vector<double> busy(static_cast<std::size_t>(slots), 0.0);  // request-seconds per slot
  for (const auto& [start, end] : stays) {
    const double a = std::max(to_s(start), w0);
    const double b = std::min(end ? to_s(*end) : w1, w1);
    if (!(b > a)) continue;
    const int first = std::clamp(static_cast<int>((a - w0) / width), 0, slots - 1);
    const int last = std::clamp(static_cast<int>((b - w0) / width), 0, slots - 1);
    for (int s = first; s <= last; ++s) {
      const double lo = w0 + s * width, hi = lo + width;
      busy[static_cast<std::size_t>(s)] += std::max(0.0, std::min(b, hi) - std::max(a, lo));
    }
  }
  // Regress the mean in-flight count of each slot on the slot's centre time.
  double sx = 0, sy = 0;
  for (int s = 0; s < slots; ++s) {
    sx += w0 + (s + 0.5) * width;
    sy += busy[static_cast<std::size_t>(s)] / width;
  }
  const double mx = sx / slots, my = sy / slots;
  double sxx = 0, sxy = 0;
  for (int s = 0; s < slots; ++s) {
    const double dx = w0 + (s + 0.5) * width - mx;
    sxx += dx * dx;
    sxy += dx * (busy[static_cast<std::size_t>(s)] / width - my);
  }
  t.mean_in_flight = my;
  t.slope_per_s = sxy / sxx;
  std::vector<double> residual(static_cast<std::size_t>(slots));
  double ssr = 0;
  for (int s = 0; s < slots; ++s) {
    const double fit = my + t.slope_per_s * (w0 + (s + 0.5) * width - mx);
    const double e = busy[static_cast<std::size_t>(s)] / width - fit;
    residual[static_cast<std::size_t>(s)] = e;
    ssr += e * e;
  }
  // Neighbouring slots share the requests that span them, so residuals are autocorrelated
  // and the OLS standard error is too small. Inflate it by the AR(1) variance factor
  // (1 + r) / (1 - r) of the residuals' lag-1 autocorrelation r (clamped to [0, 0.9]).
  double lag1 = 0;
  for (std::size_t s = 1; s < residual.size(); ++s) lag1 += residual[s] * residual[s - 1];
  const double r = ssr > 0 ? std::clamp(lag1 / ssr, 0.0, 0.9) : 0.0;
  t.residual_autocorrelation = r;
  const double slope_se = std::sqrt(ssr / (slots - 2) / sxx * (1 + r) / (1 - r));
  t.growth = t.slope_per_s * (w1 - w0);
  t.growth_stderr = slope_se * (w1 - w0);
  t.growing = t.growth > 3 * t.growth_stderr && t.growth > 1.0;
  return t;
}

}  // namespace capsweep

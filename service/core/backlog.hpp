#pragma once
// Is the client-side backlog growing over a step's measured window? A step above capacity
// can meet a percentile bound for a while (the queue has not built yet); the trend of the
// number of requests in flight gives it away. Pure: intervals in, a verdict out.

#include <optional>
#include <utility>
#include <vector>

#include "core/time.hpp"

namespace capsweep {

struct BacklogTrend {
  double mean_in_flight = 0;            // time-average over the window
  double slope_per_s = 0;               // least-squares slope of the in-flight count
  double growth = 0;                    // slope x window: requests added to the backlog
  double growth_stderr = 0;             // standard error of `growth`, corrected for autocorrelation
  double residual_autocorrelation = 0;  // lag-1, of the fit's residuals (clamped to [0, 0.9])
  // growth beyond noise: more than 3 standard errors and more than one request
  bool growing = false;
};

// `stays`: each request's [sent, finished) on the client; finished absent for a request still
// in flight when the step ended. The window is cut into `slots` (>= 3) equal parts; the mean
// in-flight count of each part is regressed on time.
BacklogTrend backlog_trend(const std::vector<std::pair<Nanos, std::optional<Nanos>>>& stays, Nanos window_start,
                           Nanos window_end, int slots = 20);

}  // namespace capsweep

#include "fleetsim/controller.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace capsweep::fleetsim {

std::string_view to_string(Metric m) noexcept {
  switch (m) {
    case Metric::in_flight:
      return "in_flight";
    case Metric::waiting:
      return "waiting";
    case Metric::gpu_util:
      return "gpu_util";
  }
  return "in_flight";
}

int Hpa::sync(Millis now, int current, const std::vector<double>& per_replica, Millis last_request) {
  // A fleet scaled to zero wakes by activation alone (a request), as KEDA's does.
  if (current == 0 && s_.min_replicas == 0) return 0;
  int recommendation = current;
  if (!per_replica.empty() && s_.target > 0) {
    const double mean = std::accumulate(per_replica.begin(), per_replica.end(), 0.0) / double(per_replica.size());
    const double ratio = mean / s_.target;
    if (std::fabs(ratio - 1) > s_.tolerance) {
      recommendation = static_cast<int>(std::ceil(double(per_replica.size()) * ratio - 1e-9));
    } else {
      recommendation = static_cast<int>(per_replica.size());
    }
  }
  // The HPA rule never goes below one replica; zero is the idle rule's alone (KEDA's part).
  recommendation = std::clamp(recommendation, std::max(1, s_.min_replicas), s_.max_replicas);
  if (s_.min_replicas == 0 && now - last_request >= s_.idle_to_zero) recommendation = 0;
  history_.push_back({now, recommendation});
  const Millis keep = std::max(s_.scale_up_window, s_.scale_down_window);
  while (!history_.empty() && now - history_.front().at > keep) history_.pop_front();
  // Scaling up takes the lowest recommendation of its window, down the highest of its.
  int up = recommendation, down = recommendation;
  for (const auto& r : history_) {
    if (now - r.at <= s_.scale_up_window) up = std::min(up, r.replicas);
    if (now - r.at <= s_.scale_down_window) down = std::max(down, r.replicas);
  }
  if (recommendation > current) return std::max(current, up);
  if (recommendation < current) return std::min(current, down);
  return current;
}

}  // namespace capsweep::fleetsim

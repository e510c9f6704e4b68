#pragma once
// The replica controller of capsweep-fleetsim: the Kubernetes HorizontalPodAutoscaler rule,
// sans I/O. Every sync period it is given the metric of each ready replica and answers how many
// replicas the fleet should have:
//
//   recommendation = ceil(ready × mean(metric) / target), unchanged while the ratio
//                    mean / target is within the tolerance of 1 (10%)
//   scale-up:   the lowest recommendation of the scale-up stabilisation window
//   scale-down: the highest recommendation of the scale-down stabilisation window
//   clamped to [min, max]; with min 0, no traffic for `idle_to_zero` scales to zero and the
//   first request activates one replica (as KEDA does).

#include <chrono>
#include <cstdint>
#include <deque>
#include <string_view>
#include <vector>

namespace capsweep::fleetsim {

enum class Metric { in_flight, waiting, gpu_util };  // per replica
std::string_view to_string(Metric m) noexcept;

struct HpaSettings {
  Metric metric = Metric::in_flight;
  double target = 8;  // the metric's target value per replica
  double tolerance = 0.1;
  std::chrono::milliseconds sync_period{15'000};
  std::chrono::milliseconds scale_up_window{0};
  std::chrono::milliseconds scale_down_window{300'000};
  int min_replicas = 1;
  int max_replicas = 10;
  std::chrono::milliseconds idle_to_zero{60'000};  // min 0: this long without a request scales to zero
};

using Millis = std::chrono::milliseconds;

class Hpa {
 public:
  explicit Hpa(HpaSettings s) : s_(s) {}

  // One sync at time `now` (since the fleet started): `current` replicas (ready or not),
  // `per_replica` the metric of each ready replica, `last_request` when a request last
  // arrived. Returns the desired count.
  int sync(Millis now, int current, const std::vector<double>& per_replica, Millis last_request);
  // A request arrived with no replica: 1 (activation), else the count unchanged.
  int activate(int current) const noexcept { return current == 0 ? 1 : current; }
  const HpaSettings& settings() const noexcept { return s_; }

 private:
  struct Recommendation {
    Millis at;
    int replicas;
  };
  HpaSettings s_;
  std::deque<Recommendation> history_;
};

}  // namespace capsweep::fleetsim

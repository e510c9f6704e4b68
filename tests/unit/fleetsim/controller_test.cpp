// The HPA rule of capsweep-fleetsim's controller, step by step on fabricated metrics.
#include "fleetsim/controller.hpp"

#include <catch2/catch.hpp>

using namespace capsweep::fleetsim;
using namespace std::chrono_literals;

namespace {

HpaSettings settings() {
  HpaSettings s;
  s.target = 10;
  s.sync_period = 15s;
  s.scale_up_window = 0s;
  s.scale_down_window = 60s;
  s.min_replicas = 1;
  s.max_replicas = 8;
  return s;
}

}  // namespace

TEST_CASE("hpa: desired = ceil(ready x mean / target), no change within the tolerance, clamped") {
  Hpa h(settings());
  CHECK(h.sync(15s, 2, {25, 25}, 15s) == 5);                        // 2 x 2.5
  CHECK(h.sync(30s, 5, {10.5, 10.5, 10.5, 10.5, 10.5}, 30s) == 5);  // within 10%
  CHECK(h.sync(45s, 5, {100, 100, 100, 100, 100}, 45s) == 8);       // clamped to max
  Hpa low(settings());
  CHECK(low.sync(15s, 1, {0}, 15s) == 1);  // the floor
  CHECK(low.sync(30s, 3, {}, 30s) == 3);   // no ready replica to read: unchanged
}

TEST_CASE("hpa: a scale-down waits for its stabilisation window - a scale-up does not") {
  Hpa h(settings());
  CHECK(h.sync(15s, 4, {10, 10, 10, 10}, 15s) == 4);
  // Load falls: the recommendation is 1, but the last 60 s recommended 4.
  CHECK(h.sync(30s, 4, {1, 1, 1, 1}, 30s) == 4);
  CHECK(h.sync(60s, 4, {1, 1, 1, 1}, 60s) == 4);
  CHECK(h.sync(76s, 4, {1, 1, 1, 1}, 76s) == 1);  // 15 s left the window
  CHECK(h.sync(90s, 1, {40}, 90s) == 4);          // up at once
}

TEST_CASE("hpa: without a window the fleet flaps with load around the threshold - with one it holds") {
  auto flips = [](std::chrono::milliseconds down_window) {
    HpaSettings s = settings();
    s.scale_down_window = down_window;
    Hpa h(s);
    int current = 2, changes = 0, last_direction = 0;
    for (int i = 1; i <= 40; ++i) {
      const double load = i % 2 ? 13.0 : 7.0;  // per replica of 2, alternating
      // Demand of 2 x load spread over the current replicas.
      const std::vector<double> per_replica(static_cast<std::size_t>(current), load * 2 / current);
      const int next =
          h.sync(std::chrono::milliseconds(15'000 * i), current, per_replica, std::chrono::milliseconds(15'000 * i));
      const int direction = next > current ? 1 : next < current ? -1 : 0;
      if (direction != 0 && direction != last_direction && last_direction != 0) ++changes;
      if (direction != 0) last_direction = direction;
      current = next;
    }
    return changes;
  };
  CHECK(flips(0s) > 10);
  CHECK(flips(60s) <= 1);
}

TEST_CASE("hpa: scale to zero after idling, and the first request activates one replica") {
  HpaSettings s = settings();
  s.min_replicas = 0;
  s.scale_down_window = 0s;
  s.idle_to_zero = 30s;
  Hpa h(s);
  CHECK(h.sync(15s, 1, {0}, 0s) == 1);
  CHECK(h.sync(30s, 1, {0}, 0s) == 0);  // 30 s without a request
  CHECK(h.activate(0) == 1);
  CHECK(h.activate(3) == 3);
  // At zero it stays there, however recent the last request: only activation wakes it.
  CHECK(h.sync(45s, 0, {}, 44s) == 0);
  // With a floor of one, a fleet at zero is brought up to it.
  HpaSettings one = settings();
  one.min_replicas = 1;
  CHECK(Hpa(one).sync(15s, 0, {}, 0s) == 1);
}

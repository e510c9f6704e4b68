#pragma once
// The target's own view of a step, from its /metrics scraped during the step: mean and max of
// vLLM's running / waiting / KV-cache gauges, token counter deltas and the trend of the waiting
// queue. A failed scrape is counted, never fatal.

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/time.hpp"
#include "observe/prometheus.hpp"

namespace capsweep::observe {

class ServerGauges {
 public:
  // Records one successful scrape taken at `at` (offset from the step's origin); with
  // `counters_only`, its counters alone (a scrape after the step: deltas, not gauges).
  void add(Nanos at, const Exposition& e, bool counters_only = false);
  struct Point;
  // Records one reading from another source (a Prometheus server's instant queries).
  void add_point(const Point& p);
  // Records a failed scrape (connection error, non-200, unparsable body).
  void add_failure(std::string error);

  std::size_t scrapes() const noexcept { return points_.size(); }
  std::size_t failures() const noexcept { return failures_; }

  struct Point {
    double t_s;
    std::optional<double> running, waiting, kv_usage, prompt_tokens, generation_tokens;
    // Prefix caching: vLLM's counters of prompt tokens looked up and found cached, or (older
    // vLLM) its hit-rate gauge.
    std::optional<double> prefix_queries, prefix_hits, prefix_hit_rate;
  };
  const std::vector<Point>& points() const noexcept { return points_; }

  // Least-squares slope of num_requests_waiting over time (requests per second); nullopt with
  // fewer than 3 scrapes that carry the gauge.
  std::optional<double> waiting_slope_per_s() const;

  // {"scrapes", "scrape_failures", "last_scrape_error", "mean_running", "max_running",
  //  "mean_waiting", "max_waiting", "mean_kv_cache_usage", "max_kv_cache_usage",
  //  "prompt_tokens_delta", "generation_tokens_delta", "waiting_slope_per_s",
  //  "prefix_cache_queries_delta", "prefix_cache_hits_delta", "prefix_cache_hit_rate"}; absent
  // gauges are null. The hit rate is hits over queries between the first and last scrape (the
  // older gauge's mean where the counters are absent).
  nlohmann::json summary() const;

 private:
  std::vector<Point> points_;
  std::size_t failures_ = 0;
  std::string last_error_;
};

}  // namespace capsweep::observe

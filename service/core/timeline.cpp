#include "core/timeline.hpp"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/stats.hpp"

namespace capsweep {

std::vector<TimelineBin> timeline(std::span<const TimelineRequest> requests, double width_s, double end_s) {
  std::vector<TimelineBin> bins;
  if (!(width_s > 0) || !(end_s > 0) || !std::isfinite(end_s)) return bins;
  const auto n = static_cast<std::size_t>(std::ceil(end_s / width_s - 1e-9));
  bins.resize(n);
  std::vector<std::vector<double>> ttft(n);
  for (std::size_t b = 0; b < n; ++b) bins[b].t_start_s = static_cast<double>(b) * width_s;
  auto bin_of = [&](double t) -> std::optional<std::size_t> {
    if (!std::isfinite(t) || t < 0) return std::nullopt;
    const auto b = static_cast<std::size_t>(t / width_s);
    return b < n ? std::optional<std::size_t>(b) : std::nullopt;
  };
  // In flight at the end of bin b: sent before it, not finished before it. Counted with a
  // difference array over the bins a request spans.
  std::vector<std::int64_t> delta(n + 1, 0);
  for (const auto& r : requests) {
    if (auto b = bin_of(r.scheduled_s)) {
      ++bins[*b].scheduled;
      if (std::isfinite(r.ttft_ms)) ttft[*b].push_back(r.ttft_ms);
    }
    if (auto b = bin_of(r.finished_s)) ++(r.ok ? bins[*b].completed : bins[*b].failed);
    if (!std::isfinite(r.sent_s)) continue;
    // First bin whose end is after the send, and first bin whose end is at or after the finish.
    const double first_end = std::floor(std::max(r.sent_s, 0.0) / width_s);
    const double last_end = std::isfinite(r.finished_s) ? std::floor(r.finished_s / width_s) : static_cast<double>(n);
    const auto from = static_cast<std::size_t>(std::min(first_end, static_cast<double>(n)));
    const auto to = static_cast<std::size_t>(std::clamp(last_end, 0.0, static_cast<double>(n)));
    if (from < to) {
      ++delta[from];
      --delta[to];
    }
  }
  std::int64_t running = 0;
  for (std::size_t b = 0; b < n; ++b) {
    running += delta[b];
    bins[b].in_flight = static_cast<std::uint64_t>(std::max<std::int64_t>(running, 0));
    auto& v = ttft[b];
    std::sort(v.begin(), v.end());
    bins[b].p50_ttft_ms = v.empty() ? std::nan("") : percentile_sorted(v, 50);
    bins[b].p95_ttft_ms = v.empty() ? std::nan("") : percentile_sorted(v, 95);
  }
  return bins;
}

double timeline_width(double duration_s, std::size_t max_bins) {
  const double want = duration_s / static_cast<double>(std::max<std::size_t>(max_bins, 1));
  for (double w : {1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0}) {
    if (w >= want) return w;
  }
  return 60.0 * std::ceil(want / 60.0);
}

nlohmann::json timeline_json(const std::vector<TimelineBin>& bins, double width_s) {
  auto latency = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json out = {{"width_s", width_s}, {"bins", nlohmann::json::array()}};
  for (const auto& b : bins) {
    out["bins"].push_back({{"t_s", b.t_start_s},
                           {"scheduled", b.scheduled},
                           {"completed", b.completed},
                           {"failed", b.failed},
                           {"in_flight", b.in_flight},
                           {"p50_ttft_ms", latency(b.p50_ttft_ms)},
                           {"p95_ttft_ms", latency(b.p95_ttft_ms)}});
  }
  return out;
}

}  // namespace capsweep

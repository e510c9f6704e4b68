#include "core/capacity.hpp"

#include <algorithm>
#include <cmath>

namespace capsweep {

std::optional<SteadyThroughput> steady_throughput(const std::vector<ProbeRequest>& ok) {
  if (ok.empty()) return std::nullopt;
  double first_sent = ok.front().sent_s, last_finish = ok.front().finished_s;
  double first_finish = ok.front().finished_s, last_first_token = ok.front().first_token_s;
  double tokens = 0;
  for (const auto& r : ok) {
    first_sent = std::min(first_sent, r.sent_s);
    last_finish = std::max(last_finish, r.finished_s);
    first_finish = std::min(first_finish, r.finished_s);
    last_first_token = std::max(last_first_token, r.first_token_s);
    tokens += r.output_tokens;
  }
  SteadyThroughput out;
  const double run = last_finish - first_sent;
  const double window = last_first_token - first_finish;
  const double mean_tokens = tokens / double(ok.size());
  if (ok.size() >= 8 && window > 0 && run > 0 && window >= 0.2 * run && mean_tokens > 0) {
    double emitted = 0;
    for (const auto& r : ok) {
      if (r.first_token_s >= first_finish && r.first_token_s <= last_first_token) emitted += 1;
      if (r.output_tokens < 2) continue;
      const double decode = r.finished_s - r.first_token_s;
      if (decode <= 0) {
        if (r.finished_s >= first_finish && r.finished_s <= last_first_token) emitted += r.output_tokens - 1;
        continue;
      }
      const double lo = std::max(r.first_token_s, first_finish);
      const double hi = std::min(r.finished_s, last_first_token);
      if (hi > lo) emitted += (r.output_tokens - 1) * (hi - lo) / decode;
    }
    out.rate_rps = emitted / window / mean_tokens;
    out.window_start_s = first_finish;
    out.window_end_s = last_first_token;
    out.method = "steady_tokens";
    return out;
  }
  if (run <= 0) return std::nullopt;
  out.rate_rps = double(ok.size()) / run;
  out.window_start_s = first_sent;
  out.window_end_s = last_finish;
  out.method = "whole_run";
  return out;
}

Saturation judge_saturation(const SaturationInput& in) {
  Saturation s;
  const double scheduled = double(in.scheduled_in_window);
  s.shortfall = scheduled - double(in.completions_in_window);
  s.completion_ratio = scheduled > 0 ? double(in.completions_in_window) / scheduled : 1.0;
  s.shortfall_limit = 3 * std::sqrt(2 * (std::max(in.mean_in_flight, 0.0) + 1)) + 1;
  if (s.shortfall > s.shortfall_limit) {
    s.completion_short = true;
    s.reasons.push_back("completions fell short of the offered requests by " +
                        std::to_string(std::lround(s.shortfall)) + " (noise allows " +
                        std::to_string(std::lround(s.shortfall_limit)) + ")");
  }
  if (in.backlog_growing) {
    s.backlog_growing = true;
    s.reasons.push_back("requests in flight grew by " + std::to_string(std::lround(in.backlog_growth)) +
                        " over the window");
  }
  if (in.server_waiting_growth) {
    const double limit = 3 * std::sqrt(2 * (std::max(in.server_mean_waiting.value_or(0), 0.0) + 1)) + 1;
    if (*in.server_waiting_growth > limit) {
      s.server_queue_growing = true;
      s.reasons.push_back("the server's waiting queue grew by " +
                          std::to_string(std::lround(*in.server_waiting_growth)) + " over the window");
    }
  }
  s.saturated = s.completion_short || s.backlog_growing || s.server_queue_growing;
  return s;
}

}  // namespace capsweep

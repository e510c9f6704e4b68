#pragma once
// Capacity judgements of a step, pure: the throughput probe's steady rate, and whether a
// fixed-rate step ran above the server's capacity (a step above capacity must never pass,
// even when its percentiles still look fine because the queue had no time to build).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace capsweep {

// One request of the throughput probe, times in seconds from the probe's origin.
struct ProbeRequest {
  double sent_s = 0;
  double first_token_s = 0;
  double finished_s = 0;
  std::uint32_t output_tokens = 0;
};

struct SteadyThroughput {
  double rate_rps = 0;        // requests per second in the steady part
  double window_start_s = 0;  // the steady part: first completion ...
  double window_end_s = 0;    // ... to the last request's first token
  std::string method;         // "steady_tokens" or "whole_run" (too short a steady part)
};

// The probe's r_max from its steady part. While every request has been sent and some still
// wait for their first token, the server is full: from the first completion to the last first
// token (neither the fill nor the tail). Output tokens emitted there (each request's tokens
// after the first spread evenly over its decode) per second, over the mean output tokens of a
// request, is the request rate the full server sustains; token counting is insensitive to
// batches that finish in lock-step. Falls back to completed / (last finish - first send) when
// the steady part is shorter than 20% of the run or has fewer than 8 requests around it.
// `ok` holds successful requests only; nullopt when it is empty.
std::optional<SteadyThroughput> steady_throughput(const std::vector<ProbeRequest>& ok);

// What a fixed-rate step shows about capacity.
struct SaturationInput {
  std::uint64_t scheduled_in_window = 0;    // requests scheduled in the measured window
  std::uint64_t completions_in_window = 0;  // successful completions in it
  double mean_in_flight = 0;                // client-side, time-averaged over the window
  bool backlog_growing = false;             // client in-flight trend (core/backlog.hpp)
  double backlog_growth = 0;
  std::optional<double> server_waiting_growth;  // slope x window of num_requests_waiting
  std::optional<double> server_mean_waiting;
};

struct Saturation {
  bool saturated = false;
  double completion_ratio = 1;  // completions / scheduled in the window
  double shortfall = 0;         // scheduled - completions in the window
  double shortfall_limit = 0;   // noise allowance of the shortfall
  bool completion_short = false;
  bool backlog_growing = false;
  bool server_queue_growing = false;
  std::vector<std::string> reasons;
};

// A stable system completes what it is offered, up to the change of the number in flight
// between the window's ends. For a queue with L in flight on average that change has a
// standard deviation near sqrt(2L) (Poisson-like occupancy), so a shortfall beyond
// 3 sqrt(2 (L + 1)) + 1 requests is a backlog that built up: the step is above capacity. The
// client's in-flight trend and the server's waiting-queue trend (growth beyond
// 3 sqrt(2 (W + 1)) + 1) are the two other witnesses; any one saturates the step.
Saturation judge_saturation(const SaturationInput& in);

}  // namespace capsweep

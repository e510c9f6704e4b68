#pragma once
// The service's limits (the config file's "limits"): what one job may ask of capsweepd. The API
// enforces the service's own; each kind of job checks its spec against them (sweep/kinds).

#include <cstddef>
#include <cstdint>

namespace capsweep {

struct ServiceLimits {
  double max_rate_rps = 20000;
  double max_step_duration_s = 3600;  // warm-up + measured, per step
  double max_total_sweep_s = 21600;
  std::uint32_t max_connections_per_sweep = 1024;
  std::uint64_t max_queued_sweeps = 100;
  std::size_t max_body_bytes = 1 << 20;
  std::size_t max_dataset_bytes = 64 << 20;         // a dataset upload's body
  int max_json_depth = 64;                          // nesting of a request body
  std::uint64_t max_requests_per_step = 1'000'000;  // requests (and stored rows) of one step
  std::uint64_t max_quality_items = 10'000;         // items a regression's quality pass asks (and stores)
  std::uint32_t max_prompt_tokens = 131'072;        // largest prompt a workload may ask for
  std::uint32_t max_output_tokens = 32'768;         // largest max_tokens a workload may ask for
  std::size_t max_api_connections = 512;            // API connections open at once (503 beyond)
  std::size_t max_api_connections_per_client = 128;
  double header_timeout_s = 10;               // a request's header must arrive within it
  std::size_t max_response_bytes = 16 << 20;  // one answer of a target (larger: an error)
  std::size_t max_sse_event_bytes = 1 << 20;  // one SSE event of a target
};

// The requests a fixed-rate step of `length_s` seconds at `rate_rps` is expected to send (what
// limits.max_requests_per_step bounds).
constexpr double expected_requests(double rate_rps, double length_s) noexcept {
  return rate_rps * length_s;
}

}  // namespace capsweep

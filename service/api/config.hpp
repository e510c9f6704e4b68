#pragma once
// capsweepd's settings: the config file (validated by schema/config.schema.json, defaults
// filled in), then command-line flags over it.

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/allow_list.hpp"
#include "core/error.hpp"

namespace capsweep::api {

struct Limits {
  double max_rate_rps = 2000;
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

// Old sweeps removed by the service (0 = keep).
struct Retention {
  double max_age_days = 0;
  std::uint64_t max_sweeps = 0;
};

struct TokenEntry {
  std::string token;
  bool can_submit = false;  // role "submit"; "read" otherwise
  std::string name;
};

struct ServiceConfig {
  std::string listen = "127.0.0.1:8080";
  std::string db = "capsweep.db";
  std::vector<TokenEntry> tokens;
  AllowList allow;
  int max_concurrent_sweeps = 1;
  Limits limits;
  // Host headers the API answers besides loopback: names, addresses or CIDR blocks (in a
  // cluster, probes and Prometheus send the pod's address as Host).
  AllowList allowed_hosts;
  std::string tls_ca_dir;         // target.tls.ca_file must lie in it ("" = refused)
  bool insecure_no_auth = false;  // allow a non-loopback listen address without tokens
  Retention retention;
};

// The defaults (an empty config file).
ServiceConfig default_config();
// Validates a config document against the schema, fills defaults and converts it.
Result<ServiceConfig> parse_config(const nlohmann::json& doc);

}  // namespace capsweep::api

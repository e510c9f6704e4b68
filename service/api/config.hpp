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
#include "core/limits.hpp"
#include "sweep/agent_jobs.hpp"

namespace capsweep::api {

// The service's limits on what a job may ask (core/limits.hpp: the job kinds check them too).
using Limits = ServiceLimits;

// Old sweeps removed by the service (0 = keep).
struct Retention {
  double max_age_days = 0;
  std::uint64_t max_sweeps = 0;
};

struct TokenEntry {
  std::string token;
  bool can_submit = false;  // role "submit"; "read" otherwise
  std::string name;
  bool agent = false;  // role "agent": the agent protocol only
};

struct ServiceConfig {
  std::string listen = "127.0.0.1:8080";
  std::string db = "capsweep.db";
  std::vector<TokenEntry> tokens;
  AllowList allow;
  int max_concurrent_sweeps = 1;
  // The most load-engine threads one step may use; 0 in the file: the cores capsweepd may run on.
  std::uint32_t engine_threads = 1;
  Limits limits;
  // Host headers the API answers besides loopback: names, addresses or CIDR blocks (in a
  // cluster, probes and Prometheus send the pod's address as Host).
  AllowList allowed_hosts;
  std::string tls_ca_dir;         // target.tls.ca_file must lie in it ("" = refused)
  bool insecure_no_auth = false;  // allow a non-loopback listen address without tokens
  Retention retention;
  // Load agents: the clock error a step accepts of them, and how long it waits for them.
  double agents_max_clock_error_ms = 1;
  double agents_join_timeout_s = 60;
  // The agents' Job through the Kubernetes API (agents.kubernetes); resolved at startup.
  sweep::AgentJobApi agent_jobs;
};

// The cores this process may run on (its CPU affinity), at least 1.
std::uint32_t usable_cores();

// The defaults (an empty config file).
ServiceConfig default_config();
// Validates a config document against the schema, fills defaults and converts it.
Result<ServiceConfig> parse_config(const nlohmann::json& doc);

}  // namespace capsweep::api

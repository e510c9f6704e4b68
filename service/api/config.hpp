#pragma once
// capsweepd's settings: the config file (validated by schema/config.schema.json, defaults
// filled in), then command-line flags over it. The target allow-list lives here too.

#include "core/error.hpp"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace capsweep::api {

// Hosts a sweep may target: IPv4/IPv6 addresses, CIDR blocks, or exact host names (compared
// case-insensitively; names are never resolved, so a name maps to nothing but itself).
class AllowList {
 public:
  // Errors name the entry ("/allow_targets/2").
  static Result<AllowList> parse(const std::vector<std::string>& entries, const std::string& field = "/allow_targets");
  // `host` as in a URL: a name, an IPv4 address or an IPv6 address with or without brackets.
  bool allows(std::string_view host) const;
  const std::vector<std::string>& entries() const noexcept { return text_; }

 private:
  struct Block {
    bool v6 = false;
    std::array<std::uint8_t, 16> addr{};
    int prefix = 0;
  };
  std::vector<Block> blocks_;
  std::vector<std::string> names_;  // lower-case
  std::vector<std::string> text_;
};

struct Limits {
  double max_rate_rps = 2000;
  double max_step_duration_s = 3600;   // warm-up + measured, per step
  double max_total_sweep_s = 21600;
  std::uint32_t max_connections_per_sweep = 1024;
  std::uint64_t max_queued_sweeps = 100;
  std::size_t max_body_bytes = 1 << 20;
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
};

// The defaults (an empty config file).
ServiceConfig default_config();
// Validates a config document against the schema, fills defaults and converts it.
Result<ServiceConfig> parse_config(const nlohmann::json& doc);

}  // namespace capsweep::api

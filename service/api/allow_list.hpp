#pragma once
// Lists of hosts a setting admits: sweep targets (allow_targets) and the Host headers the API
// answers (allowed_hosts).

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace capsweep::api {

// Hosts admitted by a setting: IPv4/IPv6 addresses, CIDR blocks, or exact host names (compared
// case-insensitively; names are never resolved, so a name maps to nothing but itself).
class AllowList {
 public:
  // Errors name the entry ("/allow_targets/2").
  static Result<AllowList> parse(const std::vector<std::string>& entries, const std::string& field = "/allow_targets");
  // `host` as in a URL: a name, an IPv4 address or an IPv6 address with or without brackets.
  // An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is matched as the IPv4 address it holds.
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

}  // namespace capsweep::api

#include "api/allow_list.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace capsweep::api {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Parses an IPv4 or IPv6 address (brackets allowed around IPv6).
bool parse_ip(std::string_view text, bool& v6, std::array<std::uint8_t, 16>& addr) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  const std::string s(text);
  addr.fill(0);
  if (inet_pton(AF_INET, s.c_str(), addr.data()) == 1) {
    v6 = false;
    return true;
  }
  if (inet_pton(AF_INET6, s.c_str(), addr.data()) == 1) {
    v6 = true;
    return true;
  }
  return false;
}

bool prefix_match(const std::array<std::uint8_t, 16>& a, const std::array<std::uint8_t, 16>& b, int bits) {
  for (int i = 0; bits > 0; ++i, bits -= 8) {
    const int n = std::min(bits, 8);
    const auto mask = static_cast<std::uint8_t>(0xFF << (8 - n));
    if ((a[static_cast<std::size_t>(i)] & mask) != (b[static_cast<std::size_t>(i)] & mask)) return false;
  }
  return true;
}

}  // namespace

Result<AllowList> AllowList::parse(const std::vector<std::string>& entries, const std::string& field) {
  AllowList list;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string f = field + "/" + std::to_string(i);
    const std::string& e = entries[i];
    list.text_.push_back(e);
    const auto slash = e.find('/');
    Block b;
    if (parse_ip(std::string_view(e).substr(0, slash), b.v6, b.addr)) {
      const int max_bits = b.v6 ? 128 : 32;
      b.prefix = max_bits;
      if (slash != std::string::npos) {
        const std::string bits = e.substr(slash + 1);
        if (bits.empty() || bits.size() > 3 || !std::all_of(bits.begin(), bits.end(), ::isdigit) ||
            std::stoi(bits) > max_bits) {
          return invalid(f, "'" + e + "': the prefix length must be 0.." + std::to_string(max_bits));
        }
        b.prefix = std::stoi(bits);
      }
      list.blocks_.push_back(b);
      continue;
    }
    if (slash != std::string::npos || e.empty() ||
        !std::all_of(e.begin(), e.end(), [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '.'; })) {
      return invalid(f, "'" + e + "' is neither an IP address, a CIDR block nor a host name");
    }
    list.names_.push_back(lower(e));
  }
  return list;
}

bool AllowList::allows(std::string_view host) const {
  Block h;
  if (parse_ip(host, h.v6, h.addr)) {
    // ::ffff:a.b.c.d is the IPv4 address a.b.c.d: match it against the IPv4 entries.
    const bool mapped = h.v6 &&
                        std::all_of(h.addr.begin(), h.addr.begin() + 10, [](std::uint8_t b) { return b == 0; }) &&
                        h.addr[10] == 0xff && h.addr[11] == 0xff;
    if (mapped) {
      std::array<std::uint8_t, 16> v4{};
      std::copy(h.addr.begin() + 12, h.addr.end(), v4.begin());
      h.addr = v4;
      h.v6 = false;
    }
    for (const auto& b : blocks_) {
      if (b.v6 == h.v6 && prefix_match(b.addr, h.addr, b.prefix)) return true;
    }
    return false;
  }
  const std::string name = lower(host);
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

}  // namespace capsweep::api

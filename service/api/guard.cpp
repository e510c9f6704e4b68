#include "api/guard.hpp"

#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>

namespace capsweep::api {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

bool is_loopback_literal(const std::string& host) {
  std::array<std::uint8_t, 16> a{};
  if (inet_pton(AF_INET, host.c_str(), a.data()) == 1) return a[0] == 127;
  if (inet_pton(AF_INET6, host.c_str(), a.data()) == 1) {
    static constexpr std::array<std::uint8_t, 16> one{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (a == one) return true;
    // ::ffff:127.x.y.z
    const bool mapped =
        std::all_of(a.begin(), a.begin() + 10, [](std::uint8_t b) { return b == 0; }) && a[10] == 0xff && a[11] == 0xff;
    return mapped && a[12] == 127;
  }
  return false;
}

std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string host_of(std::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    return std::string(authority.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  const auto colon = authority.find(':');
  return std::string(authority.substr(0, colon));
}

std::optional<Error> check_host(std::string_view host_header, const AllowList& names, std::string_view listen_host) {
  const std::string host = host_of(host_header);
  if (host.empty()) return Error{errc::forbidden, "a Host header is required", "Host"};
  if (is_loopback_literal(host) || iequals(host, "localhost") || (!listen_host.empty() && iequals(host, listen_host))) {
    return std::nullopt;
  }
  if (names.allows(host)) return std::nullopt;
  return Error{errc::forbidden,
               fmt::format("Host '{}' is not served here; add it to the service's allowed_hosts to use that name",
                           host.substr(0, 200)),
               "Host"};
}

std::optional<Error> check_origin(std::string_view origin, const AllowList& names, std::string_view listen_host) {
  if (origin.empty()) return std::nullopt;
  const auto scheme = origin.find("://");
  if (scheme == std::string_view::npos) {
    return Error{errc::forbidden, "requests from a page of another origin are refused", "Origin"};
  }
  if (check_host(origin.substr(scheme + 3), names, listen_host)) {
    return Error{errc::forbidden,
                 fmt::format("requests from pages of '{}' are refused (cross-site)", origin.substr(0, 200)), "Origin"};
  }
  return std::nullopt;
}

std::optional<Error> check_json_content_type(std::string_view content_type, std::size_t body_size, bool json_lines) {
  if (body_size == 0) return std::nullopt;
  const std::string_view media = content_type.substr(0, content_type.find(';'));
  std::string_view trimmed = media;
  while (!trimmed.empty() && trimmed.back() == ' ') trimmed.remove_suffix(1);
  while (!trimmed.empty() && trimmed.front() == ' ') trimmed.remove_prefix(1);
  if (iequals(trimmed, "application/json")) return std::nullopt;
  if (json_lines) {
    for (std::string_view t : {"application/x-ndjson", "application/jsonl", "application/x-jsonlines"}) {
      if (iequals(trimmed, t)) return std::nullopt;
    }
    return Error{errc::invalid_argument,
                 "the file must be sent with Content-Type: application/json or application/x-ndjson", "Content-Type"};
  }
  return Error{errc::invalid_argument, "the body must be sent with Content-Type: application/json", "Content-Type"};
}

std::optional<std::string> json_too_deep(std::string_view text, int max_depth) {
  // One frame per open container: for objects the last key seen, for arrays the index.
  struct Frame {
    bool array = false;
    std::size_t index = 0;
    std::string key;
  };
  std::vector<Frame> stack;
  bool expect_key = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const std::size_t start = ++i;
      while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      if (expect_key && !stack.empty() && !stack.back().array) {
        stack.back().key = std::string(text.substr(start, std::min(i, text.size()) - start));
        expect_key = false;
      }
      continue;
    }
    if (c == '{' || c == '[') {
      if (static_cast<int>(stack.size()) >= max_depth) {
        std::string pointer;
        for (const auto& f : stack) pointer += "/" + (f.array ? std::to_string(f.index) : pointer_token(f.key));
        return pointer;
      }
      stack.push_back({c == '[', 0, {}});
      expect_key = c == '{';
    } else if (c == '}' || c == ']') {
      if (!stack.empty()) stack.pop_back();
      expect_key = false;
    } else if (c == ',' && !stack.empty()) {
      if (stack.back().array)
        ++stack.back().index;
      else
        expect_key = true;
    }
  }
  return std::nullopt;
}

}  // namespace capsweep::api

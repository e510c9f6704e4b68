#pragma once
// Text helpers shared by the report's files (not part of the report's interface): reading
// JSON that may lack a key, HTML escaping, numbers as the tables show them.

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "core/json_access.hpp"

namespace capsweep::report::detail {

using json = nlohmann::json;

inline const json& at(const json& j, const char* key) {
  return json_at(j, key);
}

inline std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// j[key] as text: strings as they are, numbers as {:g}, booleans; `fallback` otherwise.
inline std::string text(const json& j, const char* key, const std::string& fallback = "-") {
  const json& v = at(j, key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return fmt::format("{:g}", v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return fallback;
}

// A finite number in format `f`, "-" otherwise.
inline std::string num(const json& v, const char* f = "{:.1f}") {
  return v.is_number() && std::isfinite(v.get<double>()) ? fmt::format(fmt::runtime(f), v.get<double>())
                                                         : std::string("-");
}

}  // namespace capsweep::report::detail

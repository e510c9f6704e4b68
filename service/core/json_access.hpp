#pragma once
// Reading JSON that may lack a key or hold null (API answers, stored summaries) without
// inserting into it or throwing.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

namespace capsweep {

// j[key], or null when j is not an object or has no such key.
inline const nlohmann::json& json_at(const nlohmann::json& j, const char* key) {
  static const nlohmann::json null;
  if (!j.is_object()) return null;
  auto it = j.find(key);
  return it != j.end() ? *it : null;
}

// j[i], or null when j is not an array or is shorter.
inline const nlohmann::json& json_item(const nlohmann::json& j, std::size_t i) {
  static const nlohmann::json null;
  return j.is_array() && i < j.size() ? j[i] : null;
}

// j[key] as a whole number >= 0 (a usage count), nullopt when absent or of another type.
inline std::optional<std::uint64_t> json_count(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = json_at(j, key);
  return v.is_number_unsigned() ? std::optional<std::uint64_t>(v.get<std::uint64_t>()) : std::nullopt;
}

}  // namespace capsweep

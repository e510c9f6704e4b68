#include "core/fields.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/text.hpp"

namespace capsweep::fields {

namespace {

using json = nlohmann::json;

// The value at obj[key], or nullptr when absent.
const json* find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

}  // namespace

Result<double> number(const json& obj, const char* key, const std::string& parent, std::optional<double> fallback,
                      Sign sign) {
  const std::string f = parent + "/" + key;
  const json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return invalid(f, "is required");
  }
  const char* what = sign == Sign::positive       ? "must be a positive number"
                     : sign == Sign::non_negative ? "must be zero or a positive number"
                                                  : "must be a number";
  if (!v->is_number()) return invalid(f, what);
  const double x = v->get<double>();
  if (!std::isfinite(x) || (sign == Sign::positive && !(x > 0)) || (sign == Sign::non_negative && !(x >= 0))) {
    return invalid(f, what);
  }
  return x;
}

Result<double> number_in(const json& obj, const char* key, const std::string& parent, std::optional<double> fallback,
                         double lo, double hi) {
  auto x = number(obj, key, parent, fallback);
  if (!x) return x;
  if (!(*x >= lo && *x <= hi)) {
    return invalid(parent + "/" + key, "must be a number in [" + json(lo).dump() + ", " + json(hi).dump() + "]");
  }
  return x;
}

Result<std::int64_t> integer_raw(const json& obj, const char* key, const std::string& parent,
                                 std::optional<std::int64_t> fallback, std::int64_t lo, std::int64_t hi) {
  const std::string f = parent + "/" + key;
  const json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return invalid(f, "is required");
  }
  const std::string range = "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  if (v->is_number_unsigned()) {
    const auto u = v->get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX) || static_cast<std::int64_t>(u) < lo ||
        static_cast<std::int64_t>(u) > hi) {
      return invalid(f, range);
    }
    return static_cast<std::int64_t>(u);
  }
  if (!v->is_number_integer() || v->get<std::int64_t>() < lo || v->get<std::int64_t>() > hi) return invalid(f, range);
  return v->get<std::int64_t>();
}

Result<Nanos> seconds(const json& obj, const char* key, const std::string& parent, Nanos fallback, bool zero_ok) {
  const std::string f = parent + "/" + key;
  const json* v = find(obj, key);
  if (!v) return fallback;
  const char* what = zero_ok ? "must be zero or a positive number of seconds" : "must be a positive number of seconds";
  if (!v->is_number()) return invalid(f, what);
  const double s = v->get<double>();
  if (!std::isfinite(s) || s < 0 || (!zero_ok && s == 0)) return invalid(f, what);
  if (s == 0) return Nanos{0};
  return duration_from_s(s, f);
}

std::optional<Error> known_keys(const json& obj, const std::vector<std::string_view>& known, const std::string& parent,
                                std::string_view what) {
  if (!obj.is_object()) return std::nullopt;
  for (const auto& item : obj.items()) {
    if (std::find(known.begin(), known.end(), std::string_view(item.key())) != known.end()) continue;
    std::string expected;
    for (auto k : known) expected += (expected.empty() ? "" : ", ") + std::string(k);
    return Error{errc::invalid_argument,
                 expected.empty() ? fmt::format("unknown {} (it takes none)", what)
                                  : fmt::format("unknown {} (expected {})", what, expected),
                 parent + "/" + printable_ascii(item.key(), 64)};
  }
  return std::nullopt;
}

}  // namespace capsweep::fields

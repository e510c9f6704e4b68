#pragma once
// One reader for the numeric fields of a JSON object (job specs, length distributions,
// targets, SLOs): a missing key gives the fallback (or "is required"), a value of the wrong
// type or outside its range an invalid_argument naming the field ("/sweep/steps") and the
// range it must lie in. Non-finite numbers are always refused.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/error.hpp"
#include "core/time.hpp"

namespace capsweep::fields {

enum class Sign {
  any,           // "must be a number"
  positive,      // "must be a positive number"
  non_negative,  // "must be zero or a positive number"
};

// obj[key] as a number; absent: `fallback`, or "is required" without one.
Result<double> number(const nlohmann::json& obj, const char* key, const std::string& parent,
                      std::optional<double> fallback, Sign sign = Sign::any);

// obj[key] as a number in [lo, hi] (both inclusive): "must be a number in [lo, hi]".
Result<double> number_in(const nlohmann::json& obj, const char* key, const std::string& parent,
                         std::optional<double> fallback, double lo, double hi);

// obj[key] as an integer in [lo, hi]; absent: `fallback`, or "is required" without one.
Result<std::int64_t> integer_raw(const nlohmann::json& obj, const char* key, const std::string& parent,
                                 std::optional<std::int64_t> fallback, std::int64_t lo, std::int64_t hi);

template <class Int>
Result<Int> integer(const nlohmann::json& obj, const char* key, const std::string& parent, std::optional<Int> fallback,
                    Int lo, Int hi) {
  auto r = integer_raw(obj, key, parent,
                       fallback ? std::optional<std::int64_t>(static_cast<std::int64_t>(*fallback)) : std::nullopt,
                       static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi));
  if (!r) return r.error();
  return static_cast<Int>(*r);
}

// obj[key] as a duration in seconds (> 0, or >= 0 with zero_ok); absent: `fallback`.
Result<Nanos> seconds(const nlohmann::json& obj, const char* key, const std::string& parent, Nanos fallback,
                      bool zero_ok = false);

// The first key of `obj` that is not one of `known`: an invalid_argument naming it
// ("/workload/prompt_tokens/p59: unknown field (expected dist, median, p95, min, max)");
// nothing when every key is known (or obj is not an object).
std::optional<Error> known_keys(const nlohmann::json& obj, const std::vector<std::string_view>& known,
                                const std::string& parent, std::string_view what = "field");

// Reads several optional fields of one object into settings that hold their defaults,
// keeping the first error:
//   fields::Reader r(j, "/sweep");
//   r.integer("steps", s.steps, 1, 100).seconds("warmup_s", s.warmup, true);
//   if (r.error()) return *r.error();
class Reader {
 public:
  Reader(const nlohmann::json& obj, std::string parent) : obj_(obj), parent_(std::move(parent)) {}

  template <class Int>
  Reader& integer(const char* key, Int& out, std::type_identity_t<Int> lo, std::type_identity_t<Int> hi) {
    if (!error_) keep(fields::integer<Int>(obj_, key, parent_, out, lo, hi), out);
    return *this;
  }
  Reader& seconds(const char* key, Nanos& out, bool zero_ok = false) {
    if (!error_) keep(fields::seconds(obj_, key, parent_, out, zero_ok), out);
    return *this;
  }
  Reader& positive(const char* key, double& out) {
    if (!error_) keep(fields::number(obj_, key, parent_, out, Sign::positive), out);
    return *this;
  }
  // An optional setting: set only when the key is present.
  Reader& positive(const char* key, std::optional<double>& out) {
    if (!error_ && obj_.contains(key)) {
      double v = 0;
      keep(fields::number(obj_, key, parent_, std::nullopt, Sign::positive), v);
      if (!error_) out = v;
    }
    return *this;
  }
  template <class Int>
  Reader& integer(const char* key, std::optional<Int>& out, std::type_identity_t<Int> lo,
                  std::type_identity_t<Int> hi) {
    if (!error_ && obj_.contains(key)) {
      Int v{};
      keep(fields::integer<Int>(obj_, key, parent_, std::nullopt, lo, hi), v);
      if (!error_) out = v;
    }
    return *this;
  }

  const std::optional<Error>& error() const noexcept { return error_; }

 private:
  template <class T>
  void keep(Result<T> r, T& out) {
    if (r)
      out = *r;
    else
      error_ = r.error();
  }

  const nlohmann::json& obj_;
  std::string parent_;
  std::optional<Error> error_;
};

}  // namespace capsweep::fields

#pragma once
// Doubles into integers without undefined behaviour: a conversion whose value does not fit
// the integer type is undefined in C++, and user input (a query parameter of 1e300, a server's
// usage count) must never reach one unchecked.

#include <cmath>
#include <limits>
#include <optional>

namespace capsweep {

// x as an Int when it is finite and within Int's range (the caller rounds first); else none.
template <class Int>
std::optional<Int> checked_integer(double x) {
  if (!std::isfinite(x)) return std::nullopt;
  // The range test in double: max() + 1 is a power of two, exact in double.
  constexpr double lo = static_cast<double>(std::numeric_limits<Int>::min());
  constexpr double hi_excl = static_cast<double>(std::numeric_limits<Int>::max() / 2 + 1) * 2.0;
  if (x < lo || x >= hi_excl) return std::nullopt;
  return static_cast<Int>(x);
}

// x clamped into Int's range (NaN gives the minimum).
template <class Int>
Int saturate(double x) {
  if (std::isnan(x)) return std::numeric_limits<Int>::min();
  if (auto v = checked_integer<Int>(x)) return *v;
  return x < 0 ? std::numeric_limits<Int>::min() : std::numeric_limits<Int>::max();
}

}  // namespace capsweep

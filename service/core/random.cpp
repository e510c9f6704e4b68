#include "core/random.hpp"

#include <cmath>

namespace capsweep {

double Rng::uniform01() noexcept {
  return static_cast<double>(engine_() >> 11) * 0x1.0p-53;
}

std::uint64_t Rng::uniform_int(std::uint64_t lo, std::uint64_t hi) noexcept {
  const std::uint64_t span = hi - lo;
  if (span == UINT64_MAX) return engine_();
  // Rejection sampling keeps the draw exactly uniform.
  const std::uint64_t range = span + 1;
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  std::uint64_t x;
  do {
    x = engine_();
  } while (x >= limit);
  return lo + x % range;
}

double Rng::exponential() noexcept {
  return -std::log1p(-uniform01());
}

double Rng::normal() noexcept {
  if (has_spare_) {
    has_spare_ = false;
    return spare_normal_;
  }
  double u, v, s;
  do {
    u = 2.0 * uniform01() - 1.0;
    v = 2.0 * uniform01() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double m = std::sqrt(-2.0 * std::log(s) / s);
  spare_normal_ = v * m;
  has_spare_ = true;
  return u * m;
}

double Rng::gamma(double shape) noexcept {
  if (shape < 1.0) {
    // G(a) = G(a + 1) * U^(1/a)
    const double g = gamma(shape + 1.0);
    double u;
    do {
      u = uniform01();
    } while (u == 0.0);
    return g * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = uniform01();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

}  // namespace capsweep

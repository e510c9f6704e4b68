#pragma once
// Reproducible random variates. std::*_distribution differ between standard libraries,
// so capsweep draws from its own samplers over std::mt19937_64: a seed gives the same
// schedule and the same lengths on every platform with an IEEE-754 libm.

#include <cstdint>
#include <random>

namespace capsweep {

// splitmix64's finaliser: a strong 64-bit mix of one word, identical on every platform (the
// seeds of prompts, sessions and salts, the schedule's digest).
constexpr std::uint64_t splitmix64(std::uint64_t x) noexcept {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // Uniform on [0, 1) with 53 random bits.
  double uniform01() noexcept;
  // Uniform integer on [lo, hi]; precondition lo <= hi.
  std::uint64_t uniform_int(std::uint64_t lo, std::uint64_t hi) noexcept;
  // Exponential with mean 1.
  double exponential() noexcept;
  // Standard normal (Marsaglia polar method).
  double normal() noexcept;
  // Gamma with the given shape > 0 and scale 1 (Marsaglia-Tsang; boosted for shape < 1).
  double gamma(double shape) noexcept;

  std::mt19937_64& engine() noexcept { return engine_; }

 private:
  std::mt19937_64 engine_;
  double spare_normal_ = 0;
  bool has_spare_ = false;
};

}  // namespace capsweep

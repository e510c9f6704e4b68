#pragma once
// Whether this test binary is built with a sanitizer (the asan and tsan presets): its code, and
// the in-process simulators it runs, are several times slower, so a latency predicted from a
// simulator's model carries more of the client's and the simulator's own handling on top.

namespace capsweep::testing {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// The relative margin a latency measured against a simulator's model is allowed: `release`
// in a release build; under a sanitizer, the handling of a request (building and parsing its
// body) grows from well under a millisecond to several, so 25% at least.
inline constexpr double model_margin(double release) {
  return kSanitized && release < 0.25 ? 0.25 : release;
}

}  // namespace capsweep::testing

#include "core/memory.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace capsweep::memory {

namespace {

constexpr std::size_t kWorthTrimming = 64 * 1024;
constexpr std::int64_t kMinGapNs = 250'000'000;

std::atomic<std::size_t> freed_since_trim{0};
std::atomic<std::int64_t> last_trim_ns{0};
std::atomic<std::size_t> trim_count{0};

std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void return_free_memory() noexcept {
  freed_since_trim = 0;
  last_trim_ns = now_ns();
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
  ++trim_count;
}

void note_freed(std::size_t bytes) noexcept {
  const std::size_t total = freed_since_trim.fetch_add(bytes) + bytes;
  if (total < kWorthTrimming) return;
  std::int64_t last = last_trim_ns.load();
  const std::int64_t now = now_ns();
  // One thread wins the right to trim; the others leave it pending.
  if (now - last < kMinGapNs || !last_trim_ns.compare_exchange_strong(last, now)) return;
  return_free_memory();
}

void trim_if_pending() noexcept {
  if (freed_since_trim.load() >= kWorthTrimming) return_free_memory();
}

std::size_t trims() noexcept {
  return trim_count.load();
}

}  // namespace capsweep::memory

#include "core/memory.hpp"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

using namespace capsweep;

// The trim state is process-wide; each ctest entry runs in a process of its own.

TEST_CASE("memory: a little freed memory is not worth a trim, now or later") {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // clear of any earlier trim
  const auto before = memory::trims();
  memory::note_freed(1000);
  memory::trim_if_pending();
  CHECK(memory::trims() == before);
}

TEST_CASE("memory: a large free trims at once, and one right after waits for the next idle check") {
  memory::return_free_memory();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto before = memory::trims();
  memory::note_freed(128 * 1024);
  CHECK(memory::trims() == before + 1);
  memory::note_freed(128 * 1024);  // within 250 ms of the last trim: left pending
  CHECK(memory::trims() == before + 1);
  memory::trim_if_pending();
  CHECK(memory::trims() == before + 2);
  memory::trim_if_pending();  // nothing pending any more
  CHECK(memory::trims() == before + 2);
}

TEST_CASE("memory: small frees add up to a trim") {
  memory::return_free_memory();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto before = memory::trims();
  for (int i = 0; i < 15; ++i) memory::note_freed(4096);
  CHECK(memory::trims() == before);
  memory::note_freed(4096);  // 64 KiB in all
  CHECK(memory::trims() == before + 1);
}

#pragma once
// Handing freed memory back to the system, so a long-running service's resident memory is
// what it holds live, not the high-water mark of its largest answer or step. glibc keeps
// freed memory in the arena of the thread that allocated it (a thread pool has several); a
// trim walks every arena and releases the free pages. Code that has just freed a lot of
// short-lived memory (a large API answer, a stored step) says so; the trim runs at once or,
// when one ran moments ago, at the next trim_if_pending() (idle loops call it).

#include <cstddef>

namespace capsweep::memory {

// Releases the free pages of every allocator arena now.
void return_free_memory() noexcept;

// About `bytes` of short-lived memory were just freed by this thread. Trims when they are
// worth it (64 KiB or more since the last trim) and no trim ran in the last 250 ms; else
// leaves the trim pending.
void note_freed(std::size_t bytes) noexcept;

// Runs a pending trim (a no-op when none is pending).
void trim_if_pending() noexcept;

// Trims run so far (for tests and /metrics).
std::size_t trims() noexcept;

}  // namespace capsweep::memory

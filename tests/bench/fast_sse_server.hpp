#pragma once
// A minimal streaming completions server for benchmarks of the load engine: one epoll thread in
// a child process of its own, answering every POST with the same SSE stream over keep-alive
// connections. It costs far less per request than the generator, so the generator's own
// ceiling shows.

#include <sys/types.h>

#include <chrono>
#include <cstdint>

namespace capsweep::bench {

// What each answer is: `tokens` content events, then usage and [DONE]. With an interval,
// every stream in flight gets its next event once per interval (a decode iteration of a
// server that batches every stream), each event an HTTP chunk and a write of its own, as
// vLLM's server sends them. Without one, the events go at once: in one chunk and one write,
// or (`write_per_event`) each in a chunk and a write of its own, back to back.
struct SseAnswer {
  std::uint32_t tokens = 4;
  std::chrono::microseconds interval{0};
  bool write_per_event = false;
};

class FastSseServer {
 public:
  // Starts the server on a free loopback port; returns once it accepts connections.
  explicit FastSseServer(SseAnswer answer = {});
  ~FastSseServer();
  FastSseServer(const FastSseServer&) = delete;
  FastSseServer& operator=(const FastSseServer&) = delete;

  std::uint16_t port() const noexcept { return port_; }

 private:
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace capsweep::bench

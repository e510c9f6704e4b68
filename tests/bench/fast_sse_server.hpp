#pragma once
// A minimal streaming completions server for benchmarks of the load engine: one epoll thread in
// a child process of its own, answering every POST with the same short SSE stream (four
// content events, usage and [DONE], in one write) over keep-alive connections. It costs far
// less per request than the generator, so the generator's own ceiling shows.

#include <sys/types.h>

#include <cstdint>

namespace capsweep::bench {

class FastSseServer {
 public:
  // Starts the server on a free loopback port; returns once it accepts connections.
  FastSseServer();
  ~FastSseServer();
  FastSseServer(const FastSseServer&) = delete;
  FastSseServer& operator=(const FastSseServer&) = delete;

  std::uint16_t port() const noexcept { return port_; }

 private:
  std::uint16_t port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace capsweep::bench

#pragma once
// Benchmark helpers: many streaming HTTP connections read with epoll on the calling thread,
// counting SSE events ("\n\n") without parsing them, and CPU pinning.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace capsweep::bench {

// Pins the calling thread to one CPU (no-op when the CPU does not exist).
void pin_to_cpu(int cpu);
// Lets the calling thread (and the threads it starts) run on every online CPU again.
void unpin();
// Raises the open-file limit to its hard maximum.
void raise_fd_limit();

class StreamReader {
 public:
  // Opens `connections` TCP connections to 127.0.0.1:port and sends `request` on each.
  StreamReader(std::uint16_t port, int connections, const std::string& request);
  ~StreamReader();

  // Reads for `duration`, returns the events counted in that time.
  std::uint64_t read_for(std::chrono::duration<double> duration);
  std::uint64_t bytes() const noexcept { return bytes_; }
  int open_connections() const noexcept { return open_; }

 private:
  int epoll_ = -1;
  std::vector<int> fds_;
  std::vector<char> last_;  // last byte of each connection, for "\n\n" across reads
  std::uint64_t bytes_ = 0;
  int open_ = 0;
};

}  // namespace capsweep::bench

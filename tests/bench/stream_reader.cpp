#include "bench/stream_reader.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <stdexcept>
#include <string_view>

namespace capsweep::bench {

void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void unpin() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(static_cast<int>(c), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void raise_fd_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
}

StreamReader::StreamReader(std::uint16_t port, int connections, const std::string& request) {
  epoll_ = epoll_create1(0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < connections; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      throw std::runtime_error(std::string("connect: ") + std::strerror(errno));
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
      close(fd);
      throw std::runtime_error("short write of the request");
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<std::uint32_t>(fds_.size());
    epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
    fds_.push_back(fd);
    last_.push_back(0);
    ++open_;
  }
}

StreamReader::~StreamReader() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
  if (epoll_ >= 0) close(epoll_);
}

std::uint64_t StreamReader::read_for(std::chrono::duration<double> duration) {
  static thread_local std::vector<char> buf(1 << 18);
  std::vector<epoll_event> events(1024);
  std::uint64_t count = 0;
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end) {
    const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 10);
    for (int i = 0; i < n; ++i) {
      const std::uint32_t idx = events[i].data.u32;
      const int fd = fds_[idx];
      if (fd < 0) continue;
      for (;;) {
        const ssize_t got = read(fd, buf.data(), buf.size());
        if (got > 0) {
          bytes_ += static_cast<std::uint64_t>(got);
          std::string_view s(buf.data(), static_cast<std::size_t>(got));
          if (last_[idx] == '\n' && s.front() == '\n') ++count;
          for (std::size_t p = s.find("\n\n"); p != std::string_view::npos; p = s.find("\n\n", p + 2)) ++count;
          last_[idx] = s.back();
          continue;
        }
        if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
          close(fd);
          fds_[idx] = -1;
          --open_;
        }
        break;
      }
    }
  }
  return count;
}

}  // namespace capsweep::bench

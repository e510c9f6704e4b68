#include "bench/fast_sse_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace capsweep::bench {

namespace {

constexpr std::string_view kHeader =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string chunk(std::string_view body) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", body.size());
  return std::string(size).append(body).append("\r\n");
}

std::string content_event(std::uint32_t i, std::uint32_t tokens) {
  const char* words[] = {" a", " b", " c", " d"};
  return std::string(
             R"(data: {"id":"cmpl-1","object":"text_completion","model":"sim-8b","choices":[{"index":0,"text":")") +
         words[i % 4] + R"(","finish_reason":)" + (i + 1 == tokens ? "\"length\"" : "null") + "}]}\n\n";
}

// Usage, [DONE] and the chunked body's end.
std::string tail(std::uint32_t tokens) {
  return chunk(R"(data: {"id":"cmpl-1","object":"text_completion","model":"sim-8b","choices":[],)"
               R"("usage":{"prompt_tokens":16,"total_tokens":)" +
               std::to_string(16 + tokens) + R"(,"completion_tokens":)" + std::to_string(tokens) +
               "}}\n\ndata: [DONE]\n\n") +
         "0\r\n\r\n";
}

// The whole answer in one write: every content event in one chunk.
std::string whole_answer(std::uint32_t tokens) {
  std::string events;
  for (std::uint32_t i = 0; i < tokens; ++i) events += content_event(i, tokens);
  return std::string(kHeader) + chunk(events) + tail(tokens);
}

// The body length a request header names (0 when none).
std::size_t content_length(std::string_view header) {
  for (std::size_t at = 0; (at = header.find('\n', at)) != std::string_view::npos;) {
    ++at;
    constexpr std::string_view key = "content-length:";
    if (header.size() - at < key.size()) break;
    if (strncasecmp(header.data() + at, key.data(), key.size()) == 0) {
      return std::strtoul(std::string(header.substr(at + key.size(), 20)).c_str(), nullptr, 10);
    }
  }
  return 0;
}

class Server {
 public:
  Server(int listener, SseAnswer answer) : answer_(answer), listener_(listener), whole_(whole_answer(answer.tokens)) {
    for (std::uint32_t i = 0; i < answer.tokens; ++i) events_.push_back(chunk(content_event(i, answer.tokens)));
    events_.back() += tail(answer.tokens);
    ep_ = epoll_create1(0);
    watch(listener_, EPOLLIN, EPOLL_CTL_ADD);
    if (answer.interval.count() > 0) {
      timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
      itimerspec its{};
      its.it_interval.tv_sec = answer.interval.count() / 1000000;
      its.it_interval.tv_nsec = answer.interval.count() % 1000000 * 1000;
      its.it_value = its.it_interval;
      timerfd_settime(timer_, 0, &its, nullptr);
      watch(timer_, EPOLLIN, EPOLL_CTL_ADD);
    }
  }

  [[noreturn]] void run() {
    std::vector<epoll_event> events(512);
    for (;;) {
      const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), 1000);
      if (getppid() == 1) _exit(0);  // the benchmark is gone
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listener_) {
          accept_all();
        } else if (fd == timer_) {
          tick();
        } else {
          if (events[i].events & EPOLLOUT) flush(fd);
          if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readable(fd);
        }
      }
    }
  }

 private:
  struct Conn {
    std::string in, out;
    bool open = false, want_out = false;
  };
  struct Stream {
    int fd;
    std::uint32_t sent;
  };

  void watch(int fd, std::uint32_t what, int op) {
    epoll_event ev{};
    ev.events = what;
    ev.data.fd = fd;
    epoll_ctl(ep_, op, fd, &ev);
  }

  Conn& conn(int fd) {
    if (static_cast<std::size_t>(fd) >= conns_.size()) conns_.resize(static_cast<std::size_t>(fd) * 2 + 1);
    return conns_[static_cast<std::size_t>(fd)];
  }

  void accept_all() {
    for (int c; (c = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
      const int one = 1;
      setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      conn(c) = Conn{};
      conn(c).open = true;
      watch(c, EPOLLIN, EPOLL_CTL_ADD);
    }
  }

  void drop(int fd) {
    conn(fd) = Conn{};
    close(fd);
  }

  void readable(int fd) {
    char buf[65536];
    const ssize_t got = read(fd, buf, sizeof buf);
    if (got <= 0) return drop(fd);
    Conn& c = conn(fd);
    c.in.append(buf, static_cast<std::size_t>(got));
    // Answer every whole request the connection holds.
    for (;;) {
      const auto end = c.in.find("\r\n\r\n");
      if (end == std::string::npos) break;
      const std::size_t total = end + 4 + content_length(std::string_view(c.in).substr(0, end + 2));
      if (c.in.size() < total) break;
      c.in.erase(0, total);
      if (answer_.interval.count() > 0) {
        c.out += kHeader;
        streams_.push_back({fd, 0});
      } else if (answer_.write_per_event) {
        c.out += kHeader;
        for (const std::string& event : events_) {
          c.out += event;
          flush(fd);
        }
      } else {
        c.out += whole_;
      }
    }
    flush(fd);
  }

  // Writes what the connection has waiting; what the socket does not take waits for EPOLLOUT.
  void flush(int fd) {
    Conn& c = conn(fd);
    if (!c.open) return;
    while (!c.out.empty()) {
      const ssize_t put = write(fd, c.out.data(), c.out.size());
      if (put < 0 && errno == EAGAIN) break;
      if (put <= 0) return drop(fd);
      c.out.erase(0, static_cast<std::size_t>(put));
    }
    const bool want = !c.out.empty();
    if (want != c.want_out) watch(fd, want ? EPOLLIN | EPOLLOUT : EPOLLIN, EPOLL_CTL_MOD);
    c.want_out = want;
  }

  // One decode iteration: every stream in flight gets its next event.
  void tick() {
    std::uint64_t expirations = 0;
    if (read(timer_, &expirations, sizeof expirations) < 0) return;
    std::erase_if(streams_, [this](Stream& s) {
      Conn& c = conn(s.fd);
      if (!c.open) return true;
      c.out += events_[s.sent++];
      flush(s.fd);
      return s.sent == answer_.tokens;
    });
  }

  SseAnswer answer_;
  int listener_, ep_ = -1, timer_ = -1;
  std::string whole_;
  std::vector<std::string> events_;  // each event's chunk; the last carries the tail
  std::vector<Conn> conns_;
  std::vector<Stream> streams_;
};

}  // namespace

FastSseServer::FastSseServer(SseAnswer answer) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(listener, 4096) != 0) {
    close(listener);
    throw std::runtime_error(std::string("fast SSE server: ") + std::strerror(errno));
  }
  socklen_t len = sizeof a;
  getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  pid_ = fork();
  if (pid_ == 0) Server(listener, answer).run();
  close(listener);  // the child holds it; it accepts from the moment listen() returned
}

FastSseServer::~FastSseServer() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

}  // namespace capsweep::bench

#include "bench/fast_sse_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace capsweep::bench {

namespace {

std::string sse_response() {
  std::string events;
  const char* words[] = {" a", " b", " c", " d"};
  for (int i = 0; i < 4; ++i) {
    events +=
        std::string(
            R"(data: {"id":"cmpl-1","object":"text_completion","model":"sim-8b","choices":[{"index":0,"text":")") +
        words[i] + R"(","finish_reason":)" + (i == 3 ? "\"length\"" : "null") + "}]}\n\n";
  }
  events += R"(data: {"id":"cmpl-1","object":"text_completion","model":"sim-8b","choices":[],)"
            R"("usage":{"prompt_tokens":16,"total_tokens":20,"completion_tokens":4}})"
            "\n\ndata: [DONE]\n\n";
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", events.size());
  return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
         std::string(size) + events + "\r\n0\r\n\r\n";
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

[[noreturn]] void serve(int listener) {
  const std::string answer = sse_response();
  const int ep = epoll_create1(0);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);
  std::vector<std::string> pending(1 << 16);
  std::vector<epoll_event> events(512);
  char buf[65536];
  for (;;) {
    const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    if (getppid() == 1) _exit(0);  // the benchmark is gone
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listener) {
        for (int c; (c = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
          const int one = 1;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          if (static_cast<std::size_t>(c) >= pending.size()) pending.resize(static_cast<std::size_t>(c) * 2);
          pending[static_cast<std::size_t>(c)].clear();
          epoll_event cev{};
          cev.events = EPOLLIN;
          cev.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
        }
        continue;
      }
      std::string& in = pending[static_cast<std::size_t>(fd)];
      const ssize_t got = read(fd, buf, sizeof buf);
      if (got <= 0) {
        close(fd);
        continue;
      }
      in.append(buf, static_cast<std::size_t>(got));
      // Answer every whole request the connection holds.
      for (;;) {
        const auto end = in.find("\r\n\r\n");
        if (end == std::string::npos) break;
        const std::size_t total = end + 4 + content_length(std::string_view(in).substr(0, end + 2));
        if (in.size() < total) break;
        in.erase(0, total);
        if (write(fd, answer.data(), answer.size()) < 0) break;
      }
    }
  }
}

}  // namespace

FastSseServer::FastSseServer() {
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
  if (pid_ == 0) serve(listener);
  close(listener);  // the child holds it; it accepts from the moment listen() returned
}

FastSseServer::~FastSseServer() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

}  // namespace capsweep::bench

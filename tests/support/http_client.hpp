#pragma once
// A small blocking HTTP/1.1 client for tests: plain requests, and streamed (SSE) responses
// whose events are timestamped on arrival with steady_clock.

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace capsweep::testing {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  bool transport_error = false;  // connect refused, reset, truncated body...
  std::string error;
};

// A TCP port on 127.0.0.1 that nothing listened on a moment ago (for a child process to bind).
std::uint16_t free_loopback_port();

// One request; GET when body is empty and method not given.
HttpResult http_request(const boost::asio::ip::tcp::endpoint& ep, const std::string& method, const std::string& target,
                        const std::string& body = {},
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000));
// The same with extra request headers (e.g. {"Authorization", "Bearer ..."}).
HttpResult http_request(const boost::asio::ip::tcp::endpoint& ep, const std::string& method, const std::string& target,
                        const std::string& body, const std::map<std::string, std::string>& headers,
                        std::chrono::milliseconds timeout = std::chrono::milliseconds(10'000));

struct SseEvent {
  std::chrono::steady_clock::time_point arrival;
  std::string data;  // the payload after "data: "
};

struct SseResult {
  int status = 0;
  std::map<std::string, std::string> headers;
  std::chrono::steady_clock::time_point sent;
  std::vector<SseEvent> events;
  std::string body;       // the whole body for non-SSE answers
  bool complete = false;  // the chunked body ended properly
  bool transport_error = false;
  std::string error;
};

// POSTs `body` and reads the streamed answer event by event.
SseResult post_stream(const boost::asio::ip::tcp::endpoint& ep, const std::string& target, const std::string& body,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(30'000));

}  // namespace capsweep::testing

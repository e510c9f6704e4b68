#pragma once
// The CLI's view of capsweepd: blocking HTTP/1.1 requests with a bearer token and a
// deadline, plain http:// only (capsweepd serves plain HTTP on a trusted network).

#include <chrono>
#include <optional>
#include <string>

namespace capsweep::cli {

struct ServerUrl {
  std::string host = "127.0.0.1";
  std::string port = "8080";
  std::string base;  // path prefix, no trailing '/'
};

// "http://host:port[/prefix]"; nullopt with `error` set otherwise.
std::optional<ServerUrl> parse_server_url(const std::string& url, std::string& error);

struct HttpAnswer {
  int status = 0;  // 0: transport error
  std::string body;
  std::string content_type;
  std::string error;  // transport error text
};

class ApiClient {
 public:
  ApiClient(ServerUrl server, std::string token, std::chrono::milliseconds timeout = std::chrono::milliseconds(30'000),
            std::string user_agent = "capsweep-cli");
  // A body is sent as `content_type` (JSON unless told).
  HttpAnswer request(const std::string& method, const std::string& path, const std::string& body = {},
                     const std::string& content_type = "application/json") const;

 private:
  ServerUrl server_;
  std::string token_;
  std::chrono::milliseconds timeout_;
  std::string user_agent_;
};

}  // namespace capsweep::cli

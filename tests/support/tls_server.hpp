#pragma once
// HTTPS on loopback for tests: a self-signed certificate for 127.0.0.1 / localhost, and a
// small HTTP/1.1 server over TLS that answers every request with a handler's reply.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

namespace capsweep::testing {

struct Credentials {
  std::string cert_pem, key_pem;
};

// A self-signed CA certificate for 127.0.0.1 / localhost, valid for a day.
Credentials make_self_signed();

struct TlsRequest {
  std::string method, target, body;
  std::map<std::string, std::string> headers;  // names in lower case
};
struct TlsReply {
  int status = 200;
  std::string body;
  std::string content_type = "application/json";
};

// Serves one connection at a time (keep-alive) on a thread of its own until destroyed.
class TlsHttpServer {
 public:
  TlsHttpServer(const Credentials& creds, std::function<TlsReply(const TlsRequest&)> handler);
  ~TlsHttpServer();
  TlsHttpServer(const TlsHttpServer&) = delete;
  TlsHttpServer& operator=(const TlsHttpServer&) = delete;
  std::uint16_t port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsweep::testing

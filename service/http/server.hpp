#pragma once
// HTTP/1.1 server plumbing shared by capsweepd and capsweep-llmsim: an accept loop and one
// coroutine per connection that reads requests (body limit, header and read deadlines,
// keep-alive) and hands each to the program's handler. Every connection runs on a strand of
// its own, so the io_context may be run by several threads; what connections share (counts,
// the registry shutdown() walks) is guarded inside. A connection beyond the total or
// per-client cap takes the place of the longest-waiting keep-alive connection idle for at
// least evict_idle_after (of that client, for its own cap), so idle sockets cannot keep
// requests out; when none has waited that long it gets a 503 with Retry-After and is closed.
// A request target over target_limit gets 414, a header over header_limit 431 (413 for a
// body over its limit). Heavy headers: include only from .cpp files and mains.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace capsweep::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

using Request = bhttp::request<bhttp::string_body>;
using Response = bhttp::response<bhttp::string_body>;

struct ServerOptions {
  std::size_t body_limit = 1 << 20;                 // larger bodies get 413
  std::chrono::milliseconds read_timeout{30'000};   // to read a request's body, or write an answer
  std::chrono::milliseconds idle_timeout{120'000};  // keep-alive wait for a request's first byte
  std::string server_name = "capsweep";
  std::chrono::milliseconds header_timeout{10'000};  // from a request's first byte to its header's end
  std::uint32_t header_limit = 16 * 1024;            // header bytes; more gets 431 (414 for the target)
  std::size_t target_limit = 8 * 1024;               // request-target bytes; more gets 414
  std::size_t max_connections = 0;                   // open at once; 0 = no cap
  std::size_t max_connections_per_client = 0;        // open at once from one address; 0 = no cap
  // At a cap, a keep-alive connection that has waited this long for its next request may be
  // closed to make room; one that waited less (a poller between polls) never is.
  std::chrono::milliseconds evict_idle_after{1000};
  // When set, the body limit of a request, chosen from its header (e.g. a larger one for uploads).
  std::function<std::size_t(const Request& header)> body_limit_for = {};
};

// What a handler did with a request. Either it returns a response for the server to write,
// or it wrote its own (a stream) and says whether the connection can carry another request.
struct Reply {
  std::optional<Response> response;
  bool keep_alive = true;
};

// Called once per request on the connection's executor. The stream is the connection's; a
// handler that streams writes to it directly and returns Reply{std::nullopt, keep_alive}.
using Handler = std::function<asio::awaitable<Reply>(Request& req, beast::tcp_stream& stream)>;

class Server {
 public:
  Server(asio::any_io_executor executor, Handler handler, ServerOptions options = {});
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the address (SO_REUSEADDR) without listening yet: until start(), connections to it
  // are refused. Throws boost::system::system_error on failure.
  void bind(const asio::ip::tcp::endpoint& endpoint);
  // The bound address (useful with port 0).
  asio::ip::tcp::endpoint local_endpoint() const;
  // Listens and starts accepting connections.
  void start();
  // Stops accepting and closes idle keep-alive connections; requests in progress finish,
  // then their connections close.
  void shutdown();
  // Connections currently open.
  std::size_t connections() const noexcept;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Parses "HOST:PORT" ("127.0.0.1:8080", "[::1]:8080", "localhost:0"); names resolve to
// loopback only when they are "localhost".
Result<asio::ip::tcp::endpoint> parse_listen_address(std::string_view text);

// A response with a JSON body and the request's version and keep-alive.
Response json_response(const Request& req, bhttp::status status, std::string body);

}  // namespace capsweep::http

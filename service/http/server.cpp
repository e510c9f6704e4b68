#include "http/server.hpp"

#include <fmt/format.h>

#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <exception>
#include <map>
#include <mutex>
#include <vector>

#include "core/log.hpp"

namespace capsweep::http {

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

void log_failure(std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log::error(fmt::format("http: connection failed: {}", ex.what()));
  }
}

// A plain error answer written by the server itself (413, 503): JSON in the API's error shape.
Response server_error(bhttp::status status, std::string_view code, std::string_view message, const ServerOptions& o) {
  Response res{status, 11};
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::server, o.server_name);
  res.body() = fmt::format(R"({{"error": {{"code": "{}", "message": "{}", "field": ""}}}})", code, message);
  res.keep_alive(false);
  res.prepare_payload();
  return res;
}
}  // namespace

// One accepted connection. Its stream lives on a strand of its own: everything the
// connection's coroutine does, and the cancel that shutdown() posts, runs on that strand.
struct Connection {
  Connection(asio::ip::tcp::socket socket, asio::ip::address from) : stream(std::move(socket)), peer(std::move(from)) {}
  beast::tcp_stream stream;
  asio::ip::address peer;
  std::atomic<bool> idle{false};            // waiting for a request's first byte (read anywhere, written on the strand)
  std::atomic<std::int64_t> idle_since{0};  // steady-clock ns when it began to wait
  std::atomic<bool> evicted{false};         // chosen to make room: not chosen twice
};

namespace {
std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

// State shared by the accept loop and every connection. The connections run on strands of
// one multi-threaded io_context, so what they share is guarded by `mutex` (held only to
// update counts and the registry, never across I/O) or atomic.
struct Server::State : std::enable_shared_from_this<State> {
  State(asio::any_io_executor ex, Handler h, ServerOptions o)
      : executor(ex), acceptor(asio::make_strand(ex)), handler(std::move(h)), options(std::move(o)) {}

  asio::any_io_executor executor;
  asio::ip::tcp::acceptor acceptor;  // on a strand of its own
  Handler handler;
  ServerOptions options;
  std::atomic<bool> stopping{false};
  std::atomic<std::size_t> open{0};
  std::atomic<std::size_t> refusing{0};  // 503 answers being written

  std::mutex mutex;
  std::uint64_t next_id = 0;
  std::map<std::uint64_t, std::weak_ptr<Connection>> registry;  // for shutdown()
  std::map<asio::ip::address, std::size_t> per_client;

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve(std::shared_ptr<Connection> conn, std::uint64_t id, asio::ip::address peer);
  asio::awaitable<void> refuse(asio::ip::tcp::socket socket, std::string message);
  asio::awaitable<bool> read_request(Connection& conn, beast::flat_buffer& buffer,
                                     bhttp::request_parser<bhttp::string_body>& parser, beast::error_code& ec);
  asio::awaitable<void> answer_too_large(beast::tcp_stream& stream, std::uint64_t limit);
  // Writes an error the server answers itself, then closes with a lingering read: the client
  // may still be sending, and closing at once would reset the connection and lose the answer.
  asio::awaitable<void> answer_and_close(beast::tcp_stream& stream, Response res);
  // Admits a new connection from `peer`, or says why not. At a cap, a connection idle for
  // evict_idle_after (of `peer`, for its own cap) is closed and the new one takes its place.
  std::optional<std::string> admit(const asio::ip::address& peer, std::uint64_t& id);
  // Closes the longest-idle connection (of `peer` when `same_client`) that has waited at least
  // evict_idle_after for its next request, so that idle keep-alive sockets never keep a new
  // connection out; never one with a request in flight or just answered. False when none.
  bool evict_idle(const asio::ip::address& peer, bool same_client);
  void release(std::uint64_t id, const asio::ip::address& peer);
};

std::optional<std::string> Server::State::admit(const asio::ip::address& peer, std::uint64_t& id) {
  bool over_total = false, over_client = false;
  {
    std::lock_guard lock(mutex);
    over_total = options.max_connections > 0 && open.load() >= options.max_connections;
    auto it = per_client.find(peer);
    over_client = options.max_connections_per_client > 0 && it != per_client.end() &&
                  it->second >= options.max_connections_per_client;
    if (!over_total && !over_client) {
      ++per_client[peer];
      ++open;
      id = next_id++;
      return std::nullopt;
    }
  }
  // Over a cap: a connection idle long enough gives its place (the count is over by one until
  // it has closed, moments later); else the new one is refused with 503 and Retry-After.
  if (evict_idle(peer, over_client && !over_total)) {
    std::lock_guard lock(mutex);
    ++per_client[peer];
    ++open;
    id = next_id++;
    return std::nullopt;
  }
  if (over_total)
    return fmt::format("the server holds its limit of {} connections; retry later", options.max_connections);
  return fmt::format("this client holds its limit of {} connections; retry later", options.max_connections_per_client);
}

bool Server::State::evict_idle(const asio::ip::address& peer, bool same_client) {
  std::shared_ptr<Connection> victim;
  {
    std::lock_guard lock(mutex);
    const std::int64_t now = steady_ns(), least = std::chrono::nanoseconds(options.evict_idle_after).count();
    std::int64_t longest = -1;
    for (auto& [cid, weak] : registry) {
      auto c = weak.lock();
      if (!c || !c->idle.load() || c->evicted.load() || (same_client && c->peer != peer)) continue;
      const std::int64_t waited = now - c->idle_since.load();
      if (waited >= least && waited > longest) {
        longest = waited;
        victim = std::move(c);
      }
    }
    if (victim) victim->evicted = true;
  }
  if (!victim) return false;
  auto ex = victim->stream.get_executor();
  asio::post(ex, [victim] {
    beast::error_code ignored;
    if (victim->idle)
      victim->stream.socket().cancel(ignored);
    else
      victim->evicted = false;  // a request came first: it stays, and may be chosen later
  });
  return true;
}

void Server::State::release(std::uint64_t id, const asio::ip::address& peer) {
  std::lock_guard lock(mutex);
  registry.erase(id);
  if (auto it = per_client.find(peer); it != per_client.end() && --it->second == 0) per_client.erase(it);
  --open;
}

asio::awaitable<void> Server::State::accept_loop() {
  auto self = shared_from_this();
  while (!stopping) {
    // Each connection gets a strand of its own, so two io threads never run one connection.
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(executor), use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || stopping) co_return;
      // Out of descriptors or a reset before accept: back off briefly instead of spinning.
      asio::steady_timer t(acceptor.get_executor(), std::chrono::milliseconds(10));
      co_await t.async_wait(use_tuple);
      continue;
    }
    socket.set_option(asio::ip::tcp::no_delay(true), ec);
    beast::error_code pec;
    const auto peer = socket.remote_endpoint(pec).address();
    std::uint64_t id = 0;
    if (auto why = admit(peer, id)) {
      // Over a cap: a short 503 when few are being refused already, else just close.
      if (refusing.load() < 64) {
        auto ex = socket.get_executor();
        asio::co_spawn(ex, refuse(std::move(socket), std::move(*why)), log_failure);
      }
      continue;
    }
    auto conn = std::make_shared<Connection>(std::move(socket), peer);
    {
      std::lock_guard lock(mutex);
      registry[id] = conn;
    }
    auto ex = conn->stream.get_executor();
    asio::co_spawn(ex, serve(std::move(conn), id, peer), log_failure);
  }
}

asio::awaitable<void> Server::State::refuse(asio::ip::tcp::socket socket, std::string message) {
  auto self = shared_from_this();
  ++refusing;
  beast::tcp_stream stream(std::move(socket));
  Response res = server_error(bhttp::status::service_unavailable, "unavailable", message, options);
  res.set(bhttp::field::retry_after, "1");
  stream.expires_after(std::chrono::seconds(2));
  co_await bhttp::async_write(stream, res, use_tuple);
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  stream.socket().close(ignored);
  --refusing;
}

// Reads one request: waits for its first byte as an idle connection (idle timeout; shutdown
// cancels it), then gives the header `header_timeout` and the body `read_timeout`, so a
// client that trickles a header cannot hold the socket for the idle timeout.
asio::awaitable<bool> Server::State::read_request(Connection& conn, beast::flat_buffer& buffer,
                                                  bhttp::request_parser<bhttp::string_body>& parser,
                                                  beast::error_code& ec) {
  auto& stream = conn.stream;
  if (buffer.size() == 0) {
    conn.idle_since = steady_ns();
    conn.idle = true;
    if (stopping) co_return false;
    stream.expires_after(options.idle_timeout);
    auto [rec, n] = co_await stream.async_read_some(buffer.prepare(4096), use_tuple);
    conn.idle = false;
    if (rec) {
      ec = rec;
      co_return false;
    }
    buffer.commit(n);
  }
  stream.expires_after(options.header_timeout);
  auto [hec, hn] = co_await bhttp::async_read_header(stream, buffer, parser, use_tuple);
  ec = hec;
  if (!ec && options.body_limit_for) {
    // The parser checks Content-Length against its limit while reading the header; the
    // request's own limit is known only now, so the check is repeated here.
    const std::uint64_t limit = options.body_limit_for(parser.get());
    if (parser.content_length() && *parser.content_length() > limit) {
      ec = bhttp::error::body_limit;
      co_return false;
    }
    parser.body_limit(limit);
  }
  if (!ec && !parser.is_done()) {
    stream.expires_after(options.read_timeout);
    std::tie(ec, hn) = co_await bhttp::async_read(stream, buffer, parser, use_tuple);
  }
  co_return !ec;
}

// 413 with a lingering close: the client may still be sending the body; closing at once would
// reset the connection and lose the answer. Stop sending, read and drop what comes (bounded
// in time and size), then close.
asio::awaitable<void> Server::State::answer_too_large(beast::tcp_stream& stream, std::uint64_t limit) {
  // The answer is a named local: GCC 12 mishandles temporaries inside a co_await expression.
  Response res = server_error(bhttp::status::payload_too_large, "payload_too_large",
                              fmt::format("request body exceeds {} bytes", limit), options);
  co_await answer_and_close(stream, std::move(res));
}

asio::awaitable<void> Server::State::answer_and_close(beast::tcp_stream& stream, Response res) {
  stream.expires_after(options.read_timeout);
  co_await bhttp::async_write(stream, res, use_tuple);
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  std::array<char, 16384> sink;
  std::size_t drained = 0;
  stream.expires_after(std::chrono::seconds(2));
  while (drained < (std::size_t{64} << 20)) {
    auto [rec, rn] = co_await stream.async_read_some(asio::buffer(sink), use_tuple);
    if (rec) break;
    drained += rn;
  }
}

namespace {

// A header that did not fit: 414 when its first line alone is longer than a target may be,
// else 431. The parser takes the request line as soon as it is whole (its target is then in
// the message) and keeps the rest of the header in the buffer until the header is whole.
Response header_too_large(const bhttp::request_parser<bhttp::string_body>& parser, const beast::flat_buffer& buffer,
                          const ServerOptions& options) {
  bool long_target = parser.get().target().size() > options.target_limit;
  if (parser.get().target().empty()) {  // the request line itself never ended
    const std::string_view head(static_cast<const char*>(buffer.data().data()), buffer.size());
    const auto eol = head.find("\r\n");
    long_target = (eol == std::string_view::npos ? head.size() : eol) > options.target_limit;
  }
  if (long_target) {
    return server_error(bhttp::status::uri_too_long, "uri_too_long",
                        fmt::format("the request target exceeds {} bytes", options.target_limit), options);
  }
  return server_error(bhttp::status::request_header_fields_too_large, "request_header_fields_too_large",
                      fmt::format("the request header exceeds {} bytes", options.header_limit), options);
}

}  // namespace

asio::awaitable<void> Server::State::serve(std::shared_ptr<Connection> conn, std::uint64_t id, asio::ip::address peer) {
  auto self = shared_from_this();
  auto& stream = conn->stream;
  beast::flat_buffer buffer;
  for (;;) {
    bhttp::request_parser<bhttp::string_body> parser;
    // With a per-request limit, the header is read without one and the limit applied after it.
    if (options.body_limit_for)
      parser.body_limit(boost::none);
    else
      parser.body_limit(options.body_limit);
    parser.header_limit(options.header_limit);
    beast::error_code ec;
    const bool got = co_await read_request(*conn, buffer, parser, ec);
    if (ec == bhttp::error::body_limit) {
      co_await answer_too_large(stream,
                                options.body_limit_for ? options.body_limit_for(parser.get()) : options.body_limit);
      break;
    }
    if (ec == bhttp::error::header_limit) {
      co_await answer_and_close(stream, header_too_large(parser, buffer, options));
      break;
    }
    if (!got) break;  // EOF, timeout, reset, shutdown or a malformed request: close quietly
    if (parser.get().target().size() > options.target_limit) {
      Response res = server_error(bhttp::status::uri_too_long, "uri_too_long",
                                  fmt::format("the request target exceeds {} bytes", options.target_limit), options);
      co_await answer_and_close(stream, std::move(res));
      break;
    }
    if (parser.get().count(bhttp::field::host) > 1) {  // RFC 9112 3.2: which host is meant is unknown
      co_await answer_and_close(stream, server_error(bhttp::status::bad_request, "bad_request",
                                                     "the request has more than one Host header", options));
      break;
    }
    Request req = parser.release();
    const bool wants_keep_alive = req.keep_alive();
    stream.expires_never();
    Reply reply = co_await handler(req, stream);
    if (reply.response) {
      Response& res = *reply.response;
      res.version(req.version());
      res.keep_alive(wants_keep_alive && reply.keep_alive && !stopping);
      if (!res.has_content_length() && !res.chunked()) res.prepare_payload();
      res.set(bhttp::field::server, options.server_name);
      stream.expires_after(options.read_timeout);
      auto [wec, wn] = co_await bhttp::async_write(stream, res, use_tuple);
      if (wec || !res.keep_alive()) break;
    } else if (!reply.keep_alive || !wants_keep_alive || stopping) {
      break;
    }
  }
  beast::error_code ignored;
  stream.socket().shutdown(asio::ip::tcp::socket::shutdown_send, ignored);
  stream.socket().close(ignored);
  release(id, peer);
}

Server::Server(asio::any_io_executor executor, Handler handler, ServerOptions options)
    : state_(std::make_shared<State>(executor, std::move(handler), std::move(options))) {}

Server::~Server() {
  state_->stopping = true;
  asio::post(state_->acceptor.get_executor(), [s = state_] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
  });
}

void Server::bind(const asio::ip::tcp::endpoint& endpoint) {
  auto& a = state_->acceptor;
  a.open(endpoint.protocol());
  a.set_option(asio::socket_base::reuse_address(true));
  if (endpoint.address().is_v6()) a.set_option(asio::ip::v6_only(true));
  a.bind(endpoint);
}

asio::ip::tcp::endpoint Server::local_endpoint() const {
  return state_->acceptor.local_endpoint();
}

void Server::start() {
  state_->acceptor.listen(asio::socket_base::max_listen_connections);
  asio::co_spawn(state_->acceptor.get_executor(), state_->accept_loop(), log_failure);
}

void Server::shutdown() {
  state_->stopping = true;
  asio::post(state_->acceptor.get_executor(), [s = state_] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
  });
  // Idle keep-alive connections are closed on their own strands; busy ones finish their
  // request and then close (serve() sees `stopping`).
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard lock(state_->mutex);
    for (auto& [id, weak] : state_->registry) {
      if (auto c = weak.lock()) conns.push_back(std::move(c));
    }
  }
  for (auto& c : conns) {
    auto ex = c->stream.get_executor();
    asio::post(ex, [c] {
      beast::error_code ignored;
      if (c->idle) c->stream.socket().cancel(ignored);
    });
  }
}

std::size_t Server::connections() const noexcept {
  return state_->open.load();
}

Result<asio::ip::tcp::endpoint> parse_listen_address(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return invalid("/listen", fmt::format("'{}' is not HOST:PORT", text));
  }
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
    return invalid("/listen", fmt::format("'{}' is not a port number", port_text));
  }
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code aec;
  auto address = asio::ip::make_address(std::string(host), aec);
  if (aec) return invalid("/listen", fmt::format("'{}' is not an IP address", host));
  return asio::ip::tcp::endpoint(address, static_cast<unsigned short>(port));
}

Response json_response(const Request& req, bhttp::status status, std::string body) {
  Response res{status, req.version()};
  res.set(bhttp::field::content_type, "application/json");
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

}  // namespace capsweep::http

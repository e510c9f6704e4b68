#include "http/server.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <charconv>
#include <exception>
#include <fmt/format.h>
#include <unordered_set>

namespace capsweep::http {

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}

struct Server::State : std::enable_shared_from_this<State> {
  State(asio::any_io_executor ex, Handler h, ServerOptions o)
      : executor(ex), acceptor(ex), handler(std::move(h)), options(std::move(o)) {}

  asio::any_io_executor executor;
  asio::ip::tcp::acceptor acceptor;
  Handler handler;
  ServerOptions options;
  bool stopping = false;
  // Connections waiting for their next request: closed on shutdown.
  std::unordered_set<beast::tcp_stream*> idle;
  std::size_t open = 0;

  asio::awaitable<void> accept_loop();
  asio::awaitable<void> serve(beast::tcp_stream stream);
};

asio::awaitable<void> Server::State::accept_loop() {
  auto self = shared_from_this();
  while (!stopping) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) {
      if (ec == asio::error::operation_aborted || stopping) co_return;
      // Out of descriptors or a reset before accept: back off briefly instead of spinning.
      asio::steady_timer t(executor, std::chrono::milliseconds(10));
      co_await t.async_wait(use_tuple);
      continue;
    }
    socket.set_option(asio::ip::tcp::no_delay(true), ec);
    asio::co_spawn(executor, serve(beast::tcp_stream(std::move(socket))),
                   [](std::exception_ptr e) {
                     if (!e) return;
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       fmt::print(stderr, "http: connection failed: {}\n", ex.what());
                     }
                   });
  }
}

asio::awaitable<void> Server::State::serve(beast::tcp_stream stream) {
  auto self = shared_from_this();
  ++open;
  beast::flat_buffer buffer;
  for (;;) {
    // Wait for the next request as an idle connection (closed on shutdown).
    bhttp::request_parser<bhttp::string_body> parser;
    parser.body_limit(options.body_limit);
    idle.insert(&stream);
    stream.expires_after(buffer.size() ? options.read_timeout : options.idle_timeout);
    auto [ec, n] = co_await bhttp::async_read_header(stream, buffer, parser, use_tuple);
    idle.erase(&stream);
    if (!ec && !parser.is_done()) {
      stream.expires_after(options.read_timeout);
      std::tie(ec, n) = co_await bhttp::async_read(stream, buffer, parser, use_tuple);
    }
    if (ec == bhttp::error::body_limit) {
      Response res{bhttp::status::payload_too_large, 11};
      res.set(bhttp::field::content_type, "application/json");
      res.set(bhttp::field::server, options.server_name);
      res.body() = fmt::format(R"({{"error": {{"code": "payload_too_large", "message": "request body exceeds {} bytes", "field": ""}}}})",
                               options.body_limit);
      res.keep_alive(false);
      res.prepare_payload();
      stream.expires_after(options.read_timeout);
      co_await bhttp::async_write(stream, res, use_tuple);
      // Lingering close: the client may still be sending the body; closing now would reset
      // the connection and lose the answer. Stop sending, read and drop what comes (bounded
      // in time and size), then close.
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
      break;
    }
    if (ec) break;  // EOF, timeout, reset or a malformed request: close quietly
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
  --open;
}

Server::Server(asio::any_io_executor executor, Handler handler, ServerOptions options)
    : state_(std::make_shared<State>(executor, std::move(handler), std::move(options))) {}

Server::~Server() {
  beast::error_code ignored;
  state_->stopping = true;
  state_->acceptor.close(ignored);
}

void Server::bind(const asio::ip::tcp::endpoint& endpoint) {
  auto& a = state_->acceptor;
  a.open(endpoint.protocol());
  a.set_option(asio::socket_base::reuse_address(true));
  if (endpoint.address().is_v6()) a.set_option(asio::ip::v6_only(true));
  a.bind(endpoint);
}

asio::ip::tcp::endpoint Server::local_endpoint() const { return state_->acceptor.local_endpoint(); }

void Server::start() {
  state_->acceptor.listen(asio::socket_base::max_listen_connections);
  asio::co_spawn(state_->executor, state_->accept_loop(), asio::detached);
}

void Server::shutdown() {
  state_->stopping = true;
  beast::error_code ignored;
  state_->acceptor.close(ignored);
  for (auto* s : state_->idle) s->socket().cancel(ignored);
}

std::size_t Server::connections() const noexcept { return state_->open; }

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

#include "support/http_client.hpp"

#include <boost/algorithm/string/case_conv.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

namespace capsweep::testing {

std::uint16_t free_loopback_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

template <class Fields>
std::map<std::string, std::string> header_map(const Fields& fields) {
  std::map<std::string, std::string> m;
  for (const auto& f : fields) {
    m[boost::algorithm::to_lower_copy(std::string(f.name_string()))] = std::string(f.value());
  }
  return m;
}

bhttp::request<bhttp::string_body> make_request(const std::string& method, const std::string& target,
                                                const std::string& body) {
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  req.set(bhttp::field::content_type, "application/json");
  req.keep_alive(false);
  req.body() = body;
  req.prepare_payload();
  return req;
}

}  // namespace

HttpResult http_request(const asio::ip::tcp::endpoint& ep, const std::string& method, const std::string& target,
                        const std::string& body, std::chrono::milliseconds timeout) {
  return http_request(ep, method, target, body, {}, timeout);
}

HttpResult http_request(const asio::ip::tcp::endpoint& ep, const std::string& method, const std::string& target,
                        const std::string& body, const std::map<std::string, std::string>& headers,
                        std::chrono::milliseconds timeout) {
  HttpResult out;
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(timeout);
    stream.connect(ep);
    auto req = make_request(method, target, body);
    for (const auto& [name, value] : headers) req.set(name, value);
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(64 << 20);
    bhttp::read(stream, buffer, parser);
    auto res = parser.release();
    out.status = static_cast<int>(res.result_int());
    out.headers = header_map(res);
    out.body = std::move(res.body());
  } catch (const std::exception& e) {
    out.transport_error = true;
    out.error = e.what();
  }
  return out;
}

SseResult post_stream(const asio::ip::tcp::endpoint& ep, const std::string& target, const std::string& body,
                      std::chrono::milliseconds timeout) {
  SseResult out;
  std::string pending;
  try {
    asio::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(timeout);
    stream.connect(ep);
    out.sent = std::chrono::steady_clock::now();
    bhttp::write(stream, make_request("POST", target, body));
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(256 << 20);
    // Each body piece is split into events as it arrives; an event is stamped when the
    // piece completing it arrives.
    auto on_body = [&](std::uint64_t, std::string_view piece, beast::error_code& ec) -> std::size_t {
      const auto now = std::chrono::steady_clock::now();
      pending.append(piece);
      std::size_t pos;
      while ((pos = pending.find("\n\n")) != std::string::npos) {
        std::string event = pending.substr(0, pos);
        pending.erase(0, pos + 2);
        if (event.rfind("data: ", 0) == 0) out.events.push_back({now, event.substr(6)});
      }
      ec = {};
      return piece.size();
    };
    parser.on_chunk_body(on_body);
    bhttp::read_header(stream, buffer, parser);
    out.status = static_cast<int>(parser.get().result_int());
    out.headers = header_map(parser.get());
    while (!parser.is_done()) bhttp::read_some(stream, buffer, parser);
    out.complete = true;
    out.body = parser.get().body();
  } catch (const std::exception& e) {
    out.transport_error = true;
    out.error = e.what();
  }
  return out;
}

}  // namespace capsweep::testing

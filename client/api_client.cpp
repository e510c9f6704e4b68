#include "api_client.hpp"

#include <fmt/format.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/system/system_error.hpp>

namespace capsweep::cli {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

std::optional<ServerUrl> parse_server_url(const std::string& url, std::string& error) {
  const std::string scheme = "http://";
  if (url.rfind(scheme, 0) != 0) {
    error = "the server URL must start with http:// (got '" + url + "')";
    return std::nullopt;
  }
  std::string rest = url.substr(scheme.size());
  ServerUrl s;
  const auto slash = rest.find('/');
  if (slash != std::string::npos) {
    s.base = rest.substr(slash);
    while (!s.base.empty() && s.base.back() == '/') s.base.pop_back();
    rest = rest.substr(0, slash);
  }
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos) {
      error = "unbalanced '[' in the server URL";
      return std::nullopt;
    }
    s.host = rest.substr(1, close - 1);
    rest = rest.substr(close + 1);
    if (!rest.empty() && rest.front() == ':') s.port = rest.substr(1);
  } else {
    const auto colon = rest.rfind(':');
    s.host = rest.substr(0, colon);
    if (colon != std::string::npos) s.port = rest.substr(colon + 1);
  }
  if (s.host.empty() || s.port.empty() || s.port.find_first_not_of("0123456789") != std::string::npos) {
    error = "the server URL needs a host and a numeric port, like http://127.0.0.1:8080";
    return std::nullopt;
  }
  return s;
}

ApiClient::ApiClient(ServerUrl server, std::string token, std::chrono::milliseconds timeout, std::string user_agent)
    : server_(std::move(server)), token_(std::move(token)), timeout_(timeout), user_agent_(std::move(user_agent)) {}

HttpAnswer ApiClient::request(const std::string& method, const std::string& path, const std::string& body,
                              const std::string& content_type) const {
  HttpAnswer out;
  try {
    asio::io_context io;
    asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.expires_after(timeout_);
    stream.connect(resolver.resolve(server_.host, server_.port));
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), server_.base + path, 11};
    req.set(bhttp::field::host, server_.host);
    req.set(bhttp::field::user_agent, user_agent_);
    if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
    if (!body.empty()) req.set(bhttp::field::content_type, content_type);
    req.keep_alive(false);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::uint64_t{512} << 20);
    bhttp::read(stream, buffer, parser);
    auto res = parser.release();
    out.status = static_cast<int>(res.result_int());
    out.content_type = std::string(res[bhttp::field::content_type]);
    out.body = std::move(res.body());
  } catch (const boost::system::system_error& e) {
    // Its what() carries Boost's source location: the code's message says what happened.
    out.status = 0;
    out.error = fmt::format("{}:{}: {}", server_.host, server_.port, e.code().message());
  } catch (const std::exception& e) {
    out.status = 0;
    out.error = e.what();
  }
  return out;
}

}  // namespace capsweep::cli

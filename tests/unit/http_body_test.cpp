#include "llm/http_body.hpp"

#include <catch2/catch.hpp>
#include <string>

using capsweep::llm::BodyDecoder;

namespace {

struct Decoded {
  std::string body;
  std::size_t consumed = 0;
  bool done = false, failed = false;
  std::string error;
};

// Feeds `wire` in pieces of `piece` bytes (0: at once) until the body is done or failed.
Decoded decode(BodyDecoder d, const std::string& wire, std::size_t piece = 0) {
  Decoded out;
  const std::string_view all(wire);
  const std::size_t step = piece == 0 ? all.size() : piece;
  for (std::size_t at = 0; at < all.size() && !d.done() && !d.failed(); at += step) {
    const std::string_view in = all.substr(at, step);
    const std::size_t used = d.feed(in, [&](std::string_view data) { out.body.append(data); });
    out.consumed += used;
    if (used < in.size()) break;
  }
  out.done = d.done();
  out.failed = d.failed();
  out.error = d.error();
  return out;
}

}  // namespace

TEST_CASE("http body: chunked data comes out whole, split anywhere, and stops at the last chunk") {
  const std::string wire =
      "7\r\ndata: a\r\n1A;name=value\r\n" + std::string(26, 'x') + "\r\n0\r\nX-Trailer: 1\r\n\r\nHTTP/1.1 200 OK\r\n";
  const std::size_t end = wire.find("HTTP/1.1");
  for (std::size_t piece : {0, 1, 2, 3, 7, 64}) {
    const Decoded d = decode(BodyDecoder::chunked(), wire, piece);
    INFO("piece " << piece);
    CHECK(d.done);
    CHECK_FALSE(d.failed);
    CHECK(d.body == "data: a" + std::string(26, 'x'));
    CHECK(d.consumed == end);  // the next answer's bytes are not this body's
  }
}

TEST_CASE("http body: bare LF line ends and upper-case sizes are read") {
  const Decoded d = decode(BodyDecoder::chunked(), "A\nabcdefghij\n0\n\n");
  CHECK(d.done);
  CHECK(d.body == "abcdefghij");
}

TEST_CASE("http body: a chunked body not yet ended is neither done nor failed, and a close cuts it") {
  BodyDecoder d = BodyDecoder::chunked();
  std::string body;
  d.feed("5\r\nhel", [&](std::string_view s) { body.append(s); });
  CHECK(body == "hel");
  CHECK_FALSE(d.done());
  CHECK_FALSE(d.failed());
  d.end_of_input();
  CHECK(d.failed());
  CHECK(std::string(d.error()) == "the connection closed before the body ended");
}

TEST_CASE("http body: malformed chunk framing fails with what was wrong") {
  const auto error_of = [](const std::string& wire) {
    const Decoded d = decode(BodyDecoder::chunked(), wire);
    CHECK(d.failed);
    CHECK_FALSE(d.done);
    return d.error;
  };
  CHECK(error_of("zz\r\n") == "a chunk size that is not hexadecimal");
  CHECK(error_of("\r\n") == "a chunk size line without a size");
  CHECK(error_of("3\rx") == "a chunk size line not ended by CRLF");
  CHECK(error_of("3\r\nabcX") == "chunk data not followed by CRLF");
  CHECK(error_of("1000000000000\r\n") == "a chunk size past 2^48 bytes");
  CHECK(error_of("1;" + std::string(5000, 'e')) == "a chunk size line longer than 4096 bytes");
  CHECK(error_of("0\r\nX: " + std::string(9000, 't')) == "trailer fields longer than 8192 bytes");
  CHECK(error_of("0\r\n\rx") == "a trailer section not ended by CRLF");
  // Nothing is decoded after a failure.
  BodyDecoder d = BodyDecoder::chunked();
  std::string body;
  d.feed("g\r\n", [&](std::string_view s) { body.append(s); });
  CHECK(d.feed("3\r\nabc\r\n", [&](std::string_view s) { body.append(s); }) == 0);
  CHECK(body.empty());
}

TEST_CASE("http body: a Content-Length body ends at its length") {
  const Decoded d = decode(BodyDecoder::length(5), "hello world", 2);
  CHECK(d.done);
  CHECK(d.body == "hello");
  CHECK(d.consumed == 5);
  CHECK(decode(BodyDecoder::length(0), "x").done);
  BodyDecoder cut = BodyDecoder::length(10);
  cut.feed("abc", [](std::string_view) {});
  cut.end_of_input();
  CHECK(cut.failed());
}

TEST_CASE("http body: a body until the close takes every byte and ends with the connection") {
  BodyDecoder d = BodyDecoder::until_close();
  std::string body;
  CHECK(d.feed("0\r\n\r\nanything", [&](std::string_view s) { body.append(s); }) == 13);
  CHECK(body == "0\r\n\r\nanything");
  CHECK_FALSE(d.done());
  d.end_of_input();
  CHECK(d.done());
  CHECK_FALSE(d.failed());
}

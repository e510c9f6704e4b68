#include "llm/sse.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using capsweep::llm::SseParser;

namespace {
std::vector<std::string> parse_all(const std::string& text, std::size_t piece = 0) {
  SseParser p;
  std::vector<std::string> out;
  auto sink = [&](std::string_view d) { out.emplace_back(d); };
  if (piece == 0) {
    REQUIRE(p.feed(text, sink));
  } else {
    for (std::size_t i = 0; i < text.size(); i += piece) REQUIRE(p.feed(std::string_view(text).substr(i, piece), sink));
  }
  return out;
}
}  // namespace

TEST_CASE("sse: events end at a blank line and keep their data") {
  auto ev = parse_all("data: {\"a\":1}\n\ndata: [DONE]\n\n");
  REQUIRE(ev.size() == 2);
  CHECK(ev[0] == "{\"a\":1}");
  CHECK(ev[1] == "[DONE]");
}

TEST_CASE("sse: events split across reads at every byte give the same result") {
  const std::string text =
      "data: one\r\n\r\n: keep-alive comment\n\ndata:two\ndata: lines\n\nevent: x\nid: 7\ndata: three\r\r";
  const auto whole = parse_all(text);
  REQUIRE(whole == std::vector<std::string>{"one", "two\nlines", "three"});
  for (std::size_t piece : {1u, 2u, 3u, 5u, 7u}) {
    INFO("piece " << piece);
    CHECK(parse_all(text, piece) == whole);
  }
}

TEST_CASE("sse: comments and fields without data dispatch nothing") {
  CHECK(parse_all(": ping\n\nevent: x\n\nretry: 10\n\n").empty());
  CHECK(parse_all("data\n\n") == std::vector<std::string>{""});  // a 'data' line without colon
}

TEST_CASE("sse: only one leading space is stripped from the value") {
  CHECK(parse_all("data:  two spaces\n\n") == std::vector<std::string>{" two spaces"});
}

TEST_CASE("sse: a cut stream leaves a partial event") {
  SseParser p;
  int n = 0;
  REQUIRE(p.feed("data: {\"choices\"", [&](std::string_view) { ++n; }));
  CHECK(n == 0);
  CHECK(p.has_partial_event());
  REQUIRE(p.feed("}\n\n", [&](std::string_view) { ++n; }));
  CHECK(n == 1);
  CHECK_FALSE(p.has_partial_event());
}

TEST_CASE("sse: an event over the size limit is an error") {
  SseParser p(16);
  CHECK_FALSE(p.feed("data: 0123456789abcdefXYZ\n\n", [](std::string_view) {}));
}

TEST_CASE("sse: an error line (llama.cpp) is kept and not dispatched, and none leaves it empty") {
  SseParser p;
  std::vector<std::string> out;
  auto sink = [&](std::string_view d) { out.emplace_back(d); };
  REQUIRE(p.feed("data: {\"a\":1}\n\n", sink));
  CHECK(p.error_field().empty());
  REQUIRE(p.feed("error: {\"error\":{\"message\":\"boom\"}}\n\nerror: second\n\n", sink));
  CHECK(out.size() == 1);
  CHECK(p.error_field() == "{\"error\":{\"message\":\"boom\"}}");  // the first one
  SseParser bare;
  REQUIRE(bare.feed("error:\n\n", sink));
  CHECK(bare.error_field() == "{}");
}

// Log lines: the three formats, escaping of what clients and targets send, format names.
#include "core/log.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep;

TEST_CASE("log: text, logfmt and json lines carry the message and the fields") {
  const char* ts = "2026-12-01T08:00:00.123Z";
  CHECK(log::format_line(log::Format::text, ts, "info", "sweep sw-1 succeeded", {{"request_id", "ab12"}}) ==
        "2026-12-01T08:00:00.123Z capsweepd: sweep sw-1 succeeded request_id=ab12");
  CHECK(log::format_line(log::Format::logfmt, ts, "info", "sweep sw-1 succeeded", {{"request_id", "ab12"}}) ==
        "ts=2026-12-01T08:00:00.123Z level=info msg=\"sweep sw-1 succeeded\" request_id=ab12");
  auto j = nlohmann::json::parse(log::format_line(log::Format::json, ts, "error", "x", {{"request_id", "ab12"}}));
  CHECK(j["ts"] == ts);
  CHECK(j["level"] == "error");
  CHECK(j["msg"] == "x");
  CHECK(j["request_id"] == "ab12");
}

TEST_CASE("log: hostile bytes are escaped in every format") {
  const std::string evil = "a\"b\\c\nd\x1b[31me=\xff\xfe";
  const std::string logfmt = log::format_line(log::Format::logfmt, "t", "info", evil, {{"path", evil}});
  CHECK(logfmt.find('\n') == std::string::npos);
  CHECK(logfmt.find('\x1b') == std::string::npos);
  CHECK(logfmt.find("msg=\"a\\\"b\\\\c\\nd\\x1b[31me=") != std::string::npos);
  const std::string text = log::format_line(log::Format::text, "t", "info", evil, {});
  CHECK(text.find('\n') == std::string::npos);
  CHECK(text.find('\x1b') == std::string::npos);
  const std::string json = log::format_line(log::Format::json, "t", "info", evil, {{"path", evil}});
  CHECK(json.find('\n') == std::string::npos);
  auto j = nlohmann::json::parse(json);  // invalid UTF-8 replaced, still one valid object
  CHECK(j["msg"].get<std::string>().rfind("a\"b\\c\nd", 0) == 0);
}

TEST_CASE("log: format names") {
  CHECK(log::parse_format("text") == log::Format::text);
  CHECK(log::parse_format("logfmt") == log::Format::logfmt);
  CHECK(log::parse_format("json") == log::Format::json);
  CHECK_FALSE(log::parse_format("JSON").has_value());
  CHECK_FALSE(log::parse_format("").has_value());
}

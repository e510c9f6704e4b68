#include "core/log.hpp"

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "core/time.hpp"

namespace capsweep::log {

namespace {

std::atomic<Format> g_format{Format::text};
std::string g_program = "capsweepd";

std::string utc_timestamp() {
  return utc_text(std::chrono::system_clock::now());
}

// logfmt: bare when the value has no space, quote, '=' or control character; quoted (with
// \" \\ \n escapes, other control bytes as \xNN) otherwise.
std::string logfmt_value(std::string_view v) {
  bool bare = !v.empty();
  for (unsigned char c : v) {
    if (c <= ' ' || c == '"' || c == '=' || c == '\\' || c >= 0x7f) bare = false;
  }
  if (bare) return std::string(v);
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < ' ' || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

}  // namespace

std::optional<Format> parse_format(std::string_view name) {
  if (name == "text") return Format::text;
  if (name == "logfmt") return Format::logfmt;
  if (name == "json") return Format::json;
  return std::nullopt;
}

void set_format(Format f) {
  g_format = f;
}

void set_program(std::string_view name) {
  g_program = std::string(name);
}

std::string format_line(Format f, std::string_view ts, std::string_view level, std::string_view message,
                        std::initializer_list<Field> fields) {
  switch (f) {
    case Format::json: {
      nlohmann::ordered_json j{{"ts", ts}, {"level", level}, {"msg", message}};
      for (const auto& field : fields) j[std::string(field.key)] = field.value;
      return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    case Format::logfmt: {
      std::string line = fmt::format("ts={} level={} msg={}", ts, level, logfmt_value(message));
      for (const auto& field : fields) line += fmt::format(" {}={}", field.key, logfmt_value(field.value));
      return line;
    }
    case Format::text:
      break;
  }
  std::string line = fmt::format("{} {}: {}", ts, g_program, printable_ascii(message, 4096));
  for (const auto& field : fields) line += fmt::format(" {}={}", field.key, logfmt_value(field.value));
  return line;
}

void write(std::string_view level, std::string_view message, std::initializer_list<Field> fields) {
  const std::string line = format_line(g_format.load(), utc_timestamp(), level, message, fields) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace capsweep::log

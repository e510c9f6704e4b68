#pragma once
// capsweepd's log lines on stderr, in one of three formats chosen at start (--log-format):
//   text    2026-12-01T08:00:00.123Z capsweepd: sweep sw-1 succeeded request_id=ab12
//   logfmt  ts=2026-12-01T08:00:00.123Z level=info msg="sweep sw-1 succeeded" request_id=ab12
//   json    {"ts":"2026-12-01T08:00:00.123Z","level":"info","msg":"sweep sw-1 succeeded","request_id":"ab12"}
// One line per call, written whole; values are escaped for their format (control characters
// and invalid UTF-8 never reach the log raw).

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace capsweep::log {

enum class Format { text, logfmt, json };

// "text", "logfmt" or "json"; nullopt for anything else.
std::optional<Format> parse_format(std::string_view name);
void set_format(Format f);
// The program named by text lines ("capsweepd" unless set; set once, before other threads).
void set_program(std::string_view name);

struct Field {
  std::string_view key;
  std::string value;
};

// The line as write() prints it (without the newline); `ts` is the time stamp.
std::string format_line(Format f, std::string_view ts, std::string_view level, std::string_view message,
                        std::initializer_list<Field> fields);

// Prints one line: level is "info", "warn" or "error".
void write(std::string_view level, std::string_view message, std::initializer_list<Field> fields = {});
inline void info(std::string_view message, std::initializer_list<Field> fields = {}) {
  write("info", message, fields);
}
inline void error(std::string_view message, std::initializer_list<Field> fields = {}) {
  write("error", message, fields);
}

}  // namespace capsweep::log

#pragma once
// Incremental Server-Sent Events parser (the WHATWG event-stream format): bytes go in as they
// arrive, split anywhere; complete events come out. Lines end in CRLF, LF or CR; ':' lines are
// comments; several "data:" lines join with '\n'; fields other than data are ignored (the
// first "error:" line is kept, as llama.cpp's server says a failure with one); an event
// is dispatched at a blank line, and one without data is not dispatched.

#include <cstddef>
#include <string>
#include <string_view>

namespace capsweep::llm {

class SseParser {
 public:
  // Limit on one event's data; a longer event is an error (returned by feed()).
  explicit SseParser(std::size_t max_event_bytes = 8 << 20) : max_event_bytes_(max_event_bytes) {}

  // Feeds bytes; calls on_event(std::string_view data) for each complete event. Returns false
  // when an event exceeded the limit (the parser is then unusable).
  template <class F>
  bool feed(std::string_view bytes, F&& on_event) {
    while (!bytes.empty()) {
      if (last_was_cr_ && bytes.front() == '\n') {  // the LF of a CRLF already ended the line
        bytes.remove_prefix(1);
        last_was_cr_ = false;
        continue;
      }
      last_was_cr_ = false;
      std::size_t end = 0;
      while (end < bytes.size() && bytes[end] != '\n' && bytes[end] != '\r') ++end;
      if (end == bytes.size()) {  // the line continues in the next read
        line_.append(bytes);
        return line_.size() <= max_event_bytes_;
      }
      // A whole line: taken straight from the input unless its start came in an earlier read.
      std::string_view line = bytes.substr(0, end);
      if (!line_.empty()) {
        line_.append(line);
        line = line_;
      }
      last_was_cr_ = bytes[end] == '\r';
      bytes.remove_prefix(end + 1);
      const bool ok = end_line(line, on_event);
      line_.clear();
      if (!ok) return false;
    }
    return true;
  }

  // Bytes of an event still waiting for its blank line (a stream that ended there was cut).
  bool has_partial_event() const noexcept { return has_data_ || !line_.empty(); }
  // The value of the first "error:" line (at most 1 KiB; "{}" when it was empty), or "".
  const std::string& error_field() const noexcept { return error_; }

 private:
  template <class F>
  bool end_line(std::string_view line, F& on_event) {
    if (line.empty()) {  // blank line: dispatch
      if (has_data_) {
        on_event(std::string_view(data_));
        data_.clear();
        has_data_ = false;
      }
      return true;
    }
    if (line.size() > max_event_bytes_) return false;
    if (line.front() != ':') {
      const auto colon = line.find(':');
      const std::string_view field = line.substr(0, colon);
      std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (field == "data") {
        if (has_data_) data_.push_back('\n');
        data_.append(value);
        has_data_ = true;
        if (data_.size() > max_event_bytes_) return false;
      } else if (field == "error" && error_.empty()) {
        // Not an SSE field, but llama.cpp's server ends a failed stream with "error: {json}".
        error_.assign(value.substr(0, 1024));
        if (error_.empty()) error_ = "{}";
      }
    }
    return true;
  }

  std::size_t max_event_bytes_;
  std::string line_;
  std::string data_;
  std::string error_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

}  // namespace capsweep::llm

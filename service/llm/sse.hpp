#pragma once
// Incremental Server-Sent Events parser (the WHATWG event-stream format): bytes go in as they
// arrive, split anywhere; complete events come out. Lines end in CRLF, LF or CR; ':' lines are
// comments; several "data:" lines join with '\n'; fields other than data are ignored; an event
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
    for (char c : bytes) {
      if (c == '\n' && last_was_cr_) {  // the LF of a CRLF already ended the line
        last_was_cr_ = false;
        continue;
      }
      last_was_cr_ = c == '\r';
      if (c == '\n' || c == '\r') {
        if (!end_line(on_event)) return false;
      } else {
        line_.push_back(c);
        if (line_.size() > max_event_bytes_) return false;
      }
    }
    return true;
  }

  // Bytes of an event still waiting for its blank line (a stream that ended there was cut).
  bool has_partial_event() const noexcept { return has_data_ || !line_.empty(); }

 private:
  template <class F>
  bool end_line(F& on_event) {
    if (line_.empty()) {  // blank line: dispatch
      if (has_data_) {
        on_event(std::string_view(data_));
        data_.clear();
        has_data_ = false;
      }
      return true;
    }
    std::string_view line(line_);
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
      }
    }
    line_.clear();
    return true;
  }

  std::size_t max_event_bytes_;
  std::string line_;
  std::string data_;
  bool has_data_ = false;
  bool last_was_cr_ = false;
};

}  // namespace capsweep::llm

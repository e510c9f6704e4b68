#pragma once
// Small text helpers shared by capsweep's parsers (CSV histograms, Prometheus text, JSONL
// datasets) and by prompt-length counting. Pure, allocation-free.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace capsweep {

// Calls f(line, line_no) for each line of `text` (1-based numbers; '\n' separated, a trailing
// '\r' removed). Stops early and returns false when f returns false.
template <class F>
bool for_each_line(std::string_view text, F&& f) {
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!f(line, line_no)) return false;
  }
  return true;
}

// Number of whitespace-separated words (the simulator's token count, the synthesiser's unit).
constexpr std::uint32_t count_words(std::string_view text) noexcept {
  std::uint32_t n = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
    if (!space && !in_word) ++n;
    in_word = !space;
  }
  return n;
}

// `text` cut to `max_bytes` with every byte outside printable ASCII (control characters,
// escape sequences, invalid or any non-ASCII UTF-8) replaced by '?': safe to log, to store as
// JSON and to print on a terminal, whatever a target or a client sent.
inline std::string printable_ascii(std::string_view text, std::size_t max_bytes = 200) {
  std::string out(text.substr(0, max_bytes));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

// `text` cut to at most `max_bytes` without splitting a UTF-8 sequence (invalid bytes are
// left for the JSON writer, which replaces them).
inline std::string cut_utf8(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t end = max_bytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // a continuation byte
  return std::string(text.substr(0, end));
}

// `text` percent-encoded for a URL's query value: every byte but letters, digits and -_.~.
inline std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '.' || c == '~';
    if (plain) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace capsweep

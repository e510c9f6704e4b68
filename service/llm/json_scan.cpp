#include "llm/json_scan.hpp"

namespace capsweep::llm {

namespace {

// A cursor over JSON text that skips values by structure.
class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void next() { ++pos_; }
  bool at_end() const { return pos_ == s_.size(); }
  void ws() {
    while (pos_ < s_.size() && std::string_view(" \t\r\n").find(s_[pos_]) != std::string_view::npos) ++pos_;
  }
  // A string; `raw` is its contents without the quotes, still escaped.
  bool string(std::string_view& raw) {
    if (peek() != '"') return false;
    const std::size_t start = ++pos_;
    for (; pos_ < s_.size(); ++pos_) {
      if (s_[pos_] == '\\') {
        ++pos_;
      } else if (s_[pos_] == '"') {
        raw = s_.substr(start, pos_++ - start);
        return true;
      } else if (static_cast<unsigned char>(s_[pos_]) < 0x20) {
        return false;
      }
    }
    return false;
  }
  // One value; `raw` is its text (a string's with its quotes).
  bool value(std::string_view& raw) {
    const std::size_t start = pos_;
    std::string_view ignored;
    if (peek() == '"') {
      if (!string(ignored)) return false;
    } else if (peek() == '{' || peek() == '[') {
      if (!nested()) return false;
    } else {
      while (pos_ < s_.size() && std::string_view("0123456789+-.eEtruefalsn").find(s_[pos_]) != std::string_view::npos)
        ++pos_;
      const std::string_view word = s_.substr(start, pos_ - start);
      const bool literal = word == "true" || word == "false" || word == "null";
      if (word.empty() || (!literal && word.find_first_of("0123456789") == std::string_view::npos)) return false;
    }
    raw = s_.substr(start, pos_ - start);
    return true;
  }

 private:
  // An object or array, to its matching end.
  bool nested() {
    int depth = 0;
    std::string_view ignored;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"') {
        if (!string(ignored)) return false;
        continue;
      }
      if (c == '{' || c == '[') ++depth;
      if ((c == '}' || c == ']') && --depth == 0) {
        ++pos_;
        return true;
      }
      if (depth > 64) return false;
      ++pos_;
    }
    return false;
  }
  std::string_view s_;
  std::size_t pos_ = 0;
};

// After a container's last element: its closing `close`, then nothing but white space.
bool ends_with(Cursor& c, char close) {
  if (c.peek() != close) return false;
  c.next();
  c.ws();
  return c.at_end();
}

}  // namespace

bool JsonMembers::parse(std::string_view object) {
  count_ = 0;
  Cursor c(object);
  c.ws();
  if (c.peek() != '{') return false;
  c.next();
  c.ws();
  if (c.peek() == '}') return ends_with(c, '}');
  for (;;) {
    std::string_view key, value;
    c.ws();
    if (!c.string(key)) return false;
    c.ws();
    if (c.peek() != ':') return false;
    c.next();
    c.ws();
    if (!c.value(value)) return false;
    if (count_ < kMaxMembers) members_[count_++] = {key, value};
    c.ws();
    if (c.peek() != ',') return ends_with(c, '}');
    c.next();
  }
}

std::string_view JsonMembers::get(std::string_view key) const noexcept {
  for (std::size_t i = 0; i < count_; ++i) {
    if (members_[i].key == key) return members_[i].value;
  }
  return {};
}

std::string_view unquote(std::string_view raw) noexcept {
  return raw.size() >= 2 && raw.front() == '"' ? raw.substr(1, raw.size() - 2) : std::string_view();
}

std::optional<std::size_t> count_elements(std::string_view array) {
  Cursor c(array);
  c.ws();
  if (c.peek() != '[') return std::nullopt;
  c.next();
  c.ws();
  if (c.peek() == ']') return ends_with(c, ']') ? std::optional<std::size_t>(0) : std::nullopt;
  std::size_t n = 0;
  for (;;) {
    std::string_view ignored;
    c.ws();
    if (!c.value(ignored)) return std::nullopt;
    ++n;
    c.ws();
    if (c.peek() != ',') return ends_with(c, ']') ? std::optional<std::size_t>(n) : std::nullopt;
    c.next();
  }
}

}  // namespace capsweep::llm

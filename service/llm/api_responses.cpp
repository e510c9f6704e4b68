// The Responses API (POST /v1/responses) as a row of the target-API table: the request's
// `input` (the prompt, or a session's turns as messages) and `max_output_tokens`; its stream of
// typed events, each read by its top-level members only ("type", "delta"), with the one
// terminal event (response.completed / response.incomplete) parsed whole for its usage; a
// whole answer's usage (input_tokens, output_tokens, their details).
#include <nlohmann/json.hpp>

#include "core/json_access.hpp"
#include "llm/api_rows.hpp"

namespace capsweep::llm {

namespace {

using json = nlohmann::json;

// The top-level members of one JSON object, as raw text (a string's still escaped, without
// its quotes). Values are skipped by structure: strings with their escapes, nesting counted.
class TopLevel {
 public:
  bool parse(std::string_view s) {
    s_ = s;
    ws();
    if (peek() != '{') return false;
    ++pos_;
    ws();
    if (peek() == '}') return end_object();
    for (;;) {
      std::string_view key, value;
      ws();
      if (!string(key)) return false;
      ws();
      if (peek() != ':') return false;
      ++pos_;
      ws();
      if (!skip_value(value)) return false;
      if (key == "type") type_ = value;
      if (key == "delta") delta_ = value;
      if (key == "response") response_ = value;
      if (key == "error") error_ = value;
      if (key == "message") message_ = value;
      ws();
      if (peek() == '}') return end_object();
      if (peek() != ',') return false;
      ++pos_;
    }
  }
  // A member's raw value ("" when absent); a string's is quoted: see unquote().
  std::string_view type_, delta_, response_, error_, message_;

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void ws() {
    while (pos_ < s_.size() && std::string_view(" \t\r\n").find(s_[pos_]) != std::string_view::npos) ++pos_;
  }
  // The object's '}': nothing but white space may follow.
  bool end_object() {
    ++pos_;
    ws();
    return pos_ == s_.size();
  }
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
  bool skip_value(std::string_view& raw) {
    const std::size_t start = pos_;
    std::string_view ignored;
    if (peek() == '"') {
      if (!string(ignored)) return false;
    } else if (peek() == '{' || peek() == '[') {
      if (!skip_nested()) return false;
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
  // An object or array, to its matching end.
  bool skip_nested() {
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

// A quoted raw string's contents ("" for anything else).
std::string_view unquote(std::string_view raw) {
  return raw.size() >= 2 && raw.front() == '"' ? raw.substr(1, raw.size() - 2) : std::string_view();
}

// A response object's usage: input_tokens, output_tokens (reasoning inside), their details.
UsageCounts response_usage(const json& response) {
  const json& usage = json_at(response, "usage");
  return {.prompt = json_count(usage, "input_tokens"),
          .completion = json_count(usage, "output_tokens"),
          .reasoning = json_count(json_at(usage, "output_tokens_details"), "reasoning_tokens"),
          .total = json_count(usage, "total_tokens")};
}

// The message of an error object (or of a bare string), at most 200 bytes.
std::string error_text(std::string_view raw) {
  const json e = json::parse(raw, nullptr, false);
  std::string m = e.is_string() ? e.get<std::string>() : "";
  if (e.is_object() && e.contains("message") && e["message"].is_string()) m = e["message"].get<std::string>();
  return m.empty() ? std::string("error event") : m.substr(0, 200);
}

// The terminal events: completed or incomplete (max_output_tokens reached) end the answer
// with its usage; failed is an error.
StreamChunk terminal_event(std::string_view type, std::string_view response_raw) {
  StreamChunk c;
  // Without its response object the answer still ended, its usage unsaid.
  const json r = response_raw.empty() ? json::object() : json::parse(response_raw, nullptr, false);
  if (!r.is_object()) return c;  // malformed
  if (type == "response.failed") {
    c.kind = StreamChunk::Kind::error;
    c.error_message = r.contains("error") ? error_text(r["error"].dump()) : "response.failed";
    return c;
  }
  const UsageCounts u = response_usage(r);
  c.kind = StreamChunk::Kind::empty;
  c.finished = true;
  c.prompt_tokens = u.prompt;
  c.completion_tokens = u.completion;
  c.reasoning_tokens = u.reasoning;
  c.total_tokens = u.total;
  return c;
}

StreamChunk read_event(std::string_view data) {
  while (!data.empty() && (data.back() == ' ' || data.back() == '\r' || data.back() == '\n')) data.remove_suffix(1);
  StreamChunk c;
  if (data == "[DONE]") {
    c.kind = StreamChunk::Kind::done;
    return c;
  }
  TopLevel t;
  if (!t.parse(data)) return c;  // malformed
  const std::string_view type = unquote(t.type_);
  if (type == "error" || (type.empty() && !t.error_.empty() && t.error_ != "null")) {
    c.kind = StreamChunk::Kind::error;
    c.error_message = error_text(!t.error_.empty() ? t.error_ : t.message_);
    return c;
  }
  if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
    return terminal_event(type, t.response_);
  }
  c.kind = StreamChunk::Kind::empty;
  const bool delta = type.size() > 6 && type.substr(type.size() - 6) == ".delta";
  if (delta && !unquote(t.delta_).empty()) {
    c.kind = StreamChunk::Kind::content;
    // Reasoning text (vLLM's reasoning_text, OpenAI's reasoning_summary_text) is a token the
    // user does not see; output text, a refusal and a call's arguments are ones they do.
    c.reasoning = type.find("reasoning") != std::string_view::npos;
    c.tool_call = type.find("function_call_arguments") != std::string_view::npos;
  }
  return c;
}

std::optional<UsageCounts> read_body(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  return response_usage(j);
}

}  // namespace

ApiRow responses_row() {
  ApiRow r;
  r.name = "responses";
  r.path = "/v1/responses";
  r.messages = true;
  r.request = [](json& body, std::string_view prompt, std::string_view messages, std::uint32_t max_tokens) {
    body["input"] = messages.empty() ? json(prompt) : json::parse(messages, nullptr, false);
    body["max_output_tokens"] = max_tokens;
    // A load test's answers are not kept on the server unless the spec asks (extra_body).
    if (!body.contains("store")) body["store"] = false;
  };
  r.read_chunk = read_event;
  r.read_body = read_body;
  r.stream_usage_option = false;
  r.quality = false;
  r.keep_state = [](json& body, std::string_view previous_id) {
    body["store"] = true;  // the next turn continues this answer
    if (!previous_id.empty()) body["previous_response_id"] = previous_id;
  };
  return r;
}

}  // namespace capsweep::llm

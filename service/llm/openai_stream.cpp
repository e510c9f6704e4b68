#include "llm/openai_stream.hpp"

#include <cctype>
#include <charconv>
#include <nlohmann/json.hpp>

#include "core/json_access.hpp"

namespace capsweep::llm {
namespace {

// Where in the document the scanner is; only these places matter.
enum class Ctx {
  root,
  choices,
  choice0,
  delta,
  usage,
  usage_details,
  error,
  tool_calls,     // delta.tool_calls: an array of tool call deltas
  tool_call,      // one of them
  tool_function,  // its function: name and arguments, streamed in pieces
  content_parts,  // delta.content given as an array of parts
  content_part,   // one part: {"type": "text" | "thinking" | ..., "text" | "thinking": ...}
  part_thinking,  // anything inside a part's "thinking" / "reasoning" value
  other
};

class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}

  bool document(StreamChunk& out) {
    out_ = &out;
    ws();
    if (peek() != '{') return false;
    if (!value(Ctx::root, 0)) return false;
    ws();
    return pos_ == s_.size();
  }

  bool saw_choices = false, choices_empty = true, saw_usage = false, saw_error = false;
  bool has_text = false, has_visible = false, has_role = false, object_is_error = false;
  bool has_tool_call = false;

 private:
  static constexpr int kMaxDepth = 64;

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool lit(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  // Scans a string; `raw` receives its raw (still escaped) contents.
  bool string(std::string_view& raw) {
    if (peek() != '"') return false;
    const std::size_t start = ++pos_;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"') {
        raw = s_.substr(start, pos_ - start);
        ++pos_;
        return true;
      }
      if (c == '\\') {
        if (++pos_ >= s_.size()) return false;
        const char e = s_[pos_];
        if (e == 'u') {
          for (int i = 0; i < 4; ++i) {
            if (++pos_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[pos_]))) return false;
          }
        } else if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return false;
        }
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return false;
      }
      ++pos_;
    }
    return false;
  }

  bool number(std::optional<std::uint64_t>* capture) {
    const std::size_t start = pos_;
    if (peek() == '-') ++pos_;
    while (pos_ < s_.size() && std::string_view("0123456789+-.eE").find(s_[pos_]) != std::string_view::npos) ++pos_;
    if (pos_ == start) return false;
    const std::string_view text = s_.substr(start, pos_ - start);
    double check = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), check);
    if (ec != std::errc() || p != text.data() + text.size()) return false;
    if (capture) {
      std::uint64_t v = 0;
      auto [q, ec2] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec2 == std::errc() && q == text.data() + text.size()) *capture = v;
    }
    return true;
  }

  // `ctx` is the context of this value if it is an object or array; scalars are judged by
  // the key they belong to in `parent`.
  bool value(Ctx ctx, int depth, std::string_view key = {}, Ctx parent = Ctx::other) {
    if (depth > kMaxDepth) return false;
    ws();
    switch (peek()) {
      case '{':
        return object(ctx, depth);
      case '[':
        return array(ctx, depth);
      case '"': {
        std::string_view raw;
        if (!string(raw)) return false;
        on_string(parent, key, raw);
        return true;
      }
      case 't':
        return lit("true");
      case 'f':
        return lit("false");
      case 'n':
        return lit("null");
      default: {
        std::optional<std::uint64_t>* capture = nullptr;
        if (parent == Ctx::usage && key == "completion_tokens") capture = &out_->completion_tokens;
        if (parent == Ctx::usage && key == "prompt_tokens") capture = &out_->prompt_tokens;
        if (parent == Ctx::usage_details && key == "reasoning_tokens") capture = &out_->reasoning_tokens;
        if (parent == Ctx::usage && key == "total_tokens") capture = &out_->total_tokens;
        return number(capture);
      }
    }
  }

  void on_string(Ctx ctx, std::string_view key, std::string_view raw) {
    if (on_part_string(ctx, key, raw)) return;
    if ((ctx == Ctx::choice0 && key == "text") || (ctx == Ctx::delta && (key == "content" || key == "refusal"))) {
      // A refusal is text the user sees, streamed like an answer.
      if (!raw.empty()) has_text = has_visible = true;
    } else if (ctx == Ctx::tool_function && (key == "arguments" || key == "name")) {
      // A tool call's name and arguments, streamed in pieces, are generated tokens.
      if (!raw.empty()) has_text = has_visible = has_tool_call = true;
    } else if (ctx == Ctx::delta && (key == "reasoning_content" || key == "reasoning")) {
      if (!raw.empty()) has_text = true;
    } else if (ctx == Ctx::delta && key == "role") {
      has_role = true;
    } else if (ctx == Ctx::choice0 && key == "finish_reason") {
      out_->finished = true;
    } else if (ctx == Ctx::root && key == "object" && raw == "error") {
      object_is_error = true;
    } else if ((ctx == Ctx::error && key == "message") || (ctx == Ctx::root && key == "message") ||
               (ctx == Ctx::root && key == "error")) {
      out_->error_message.assign(raw.substr(0, 200));
    }
  }

  // A string inside a content part (delta.content as an array). True when it was one.
  bool on_part_string(Ctx ctx, std::string_view key, std::string_view raw) {
    if (ctx == Ctx::content_part) {
      if (key == "type") part_type_ = raw;
      if (key == "text" && !raw.empty()) part_text_ = true;
      if ((key == "thinking" || key == "reasoning") && !raw.empty()) part_thinking_ = true;
      return true;
    }
    if (ctx == Ctx::part_thinking) {
      if (key != "type" && key != "signature" && !raw.empty()) part_thinking_ = true;
      return true;
    }
    return false;
  }

  // A content part ended: thinking is a token the user does not see, text one they do.
  void end_part() {
    const bool thinking_type = part_type_ == "thinking" || part_type_ == "reasoning";
    if (part_thinking_ || (thinking_type && part_text_)) {
      has_text = true;
    } else if (part_text_) {
      has_text = has_visible = true;
    }
    part_type_ = {};
    part_text_ = part_thinking_ = false;
  }

  // The context of `key`'s value inside an object at `ctx`.
  static Ctx child(Ctx ctx, std::string_view key) {
    switch (ctx) {
      case Ctx::root:
        if (key == "choices") return Ctx::choices;
        if (key == "usage") return Ctx::usage;
        if (key == "error") return Ctx::error;
        return Ctx::other;
      case Ctx::choice0:
        return key == "delta" ? Ctx::delta : Ctx::other;
      case Ctx::delta:
        if (key == "tool_calls") return Ctx::tool_calls;
        if (key == "content") return Ctx::content_parts;
        return Ctx::other;
      case Ctx::tool_call:
        return key == "function" ? Ctx::tool_function : Ctx::other;
      case Ctx::content_part:
        return key == "thinking" || key == "reasoning" ? Ctx::part_thinking : Ctx::other;
      case Ctx::part_thinking:
        return Ctx::part_thinking;
      case Ctx::usage:
        return key == "completion_tokens_details" ? Ctx::usage_details : Ctx::other;
      default:
        return Ctx::other;
    }
  }

  // The context of an array's element `index` inside an array at `ctx`.
  static Ctx element(Ctx ctx, int index) {
    switch (ctx) {
      case Ctx::choices:
        return index == 0 ? Ctx::choice0 : Ctx::other;
      case Ctx::tool_calls:
        return Ctx::tool_call;
      case Ctx::content_parts:
        return Ctx::content_part;
      case Ctx::part_thinking:
        return Ctx::part_thinking;
      default:
        return Ctx::other;
    }
  }

  bool object(Ctx ctx, int depth) {
    ++pos_;  // '{'
    if (ctx == Ctx::usage) saw_usage = true;
    if (ctx == Ctx::error) saw_error = true;
    ws();
    if (peek() == '}') {
      ++pos_;
      if (ctx == Ctx::content_part) end_part();
      return true;
    }
    for (;;) {
      ws();
      std::string_view key;
      if (!string(key)) return false;
      ws();
      if (peek() != ':') return false;
      ++pos_;
      const Ctx c = child(ctx, key);
      ws();
      if (ctx == Ctx::root && (key == "usage" || key == "error") && peek() == 'n') {
        if (!lit("null")) return false;  // "usage": null / "error": null say nothing
      } else {
        if (ctx == Ctx::root && key == "error") saw_error = true;
        if (!value(c, depth + 1, key, ctx)) return false;
      }
      ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        if (ctx == Ctx::content_part) end_part();
        return true;
      }
      return false;
    }
  }

  bool array(Ctx ctx, int depth) {
    ++pos_;  // '['
    if (ctx == Ctx::choices) saw_choices = true;
    ws();
    if (peek() == ']') {
      ++pos_;
      return true;
    }
    for (int index = 0;; ++index) {
      if (ctx == Ctx::choices) choices_empty = false;
      if (!value(element(ctx, index), depth + 1, {}, ctx)) return false;
      ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return true;
      }
      return false;
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  StreamChunk* out_ = nullptr;
  // The content part being scanned (parts do not nest).
  std::string_view part_type_;
  bool part_text_ = false, part_thinking_ = false;
};

}  // namespace

StreamChunk interpret_chunk(std::string_view data) {
  StreamChunk out;
  while (!data.empty() && (data.back() == ' ' || data.back() == '\r' || data.back() == '\n')) data.remove_suffix(1);
  while (!data.empty() && data.front() == ' ') data.remove_prefix(1);
  if (data == "[DONE]") {
    out.kind = StreamChunk::Kind::done;
    return out;
  }
  Scanner sc(data);
  if (!sc.document(out)) {
    out = StreamChunk{};
    out.kind = StreamChunk::Kind::malformed;
    return out;
  }
  if (sc.saw_error || sc.object_is_error) {
    out.kind = StreamChunk::Kind::error;
    if (out.error_message.empty()) out.error_message = "error event";
  } else if (sc.has_text) {
    out.kind = StreamChunk::Kind::content;
    out.reasoning = !sc.has_visible;
    out.tool_call = sc.has_tool_call;
  } else if (sc.saw_choices && sc.choices_empty && sc.saw_usage) {
    out.kind = StreamChunk::Kind::usage_only;
  } else if (sc.has_role) {
    out.kind = StreamChunk::Kind::role_only;
  } else {
    out.kind = StreamChunk::Kind::empty;
  }
  return out;
}

std::optional<std::uint64_t> generated_tokens(const UsageCounts& u) noexcept {
  if (!u.completion) return std::nullopt;
  // Reasoning inside completion_tokens (OpenAI's and vLLM's way): total = prompt + completion.
  // Counted apart (total = prompt + completion + reasoning): the generated tokens are what the
  // total holds beyond the prompt.
  if (u.prompt && u.total && *u.total > *u.prompt + *u.completion) return *u.total - *u.prompt;
  // Without a total, more reasoning than completion tokens cannot have been inside them.
  if (!u.total && u.reasoning && *u.reasoning > *u.completion) return *u.completion + *u.reasoning;
  return u.completion;
}

std::optional<UsageCounts> read_answer_usage(std::string_view body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  const nlohmann::json& usage = json_at(j, "usage");
  return UsageCounts{.prompt = json_count(usage, "prompt_tokens"),
                     .completion = json_count(usage, "completion_tokens"),
                     .reasoning = json_count(json_at(usage, "completion_tokens_details"), "reasoning_tokens"),
                     .total = json_count(usage, "total_tokens")};
}

}  // namespace capsweep::llm

#pragma once
// What one SSE data payload of an OpenAI-compatible completion stream says, read by a small
// allocation-free JSON scanner (nlohmann per token would cost more than the rest of the load
// engine). Understands completions (choices[0].text) and chat (choices[0].delta.content /
// reasoning_content / role), usage chunks, finish_reason, "[DONE]" and error events.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace capsweep::llm {

struct StreamChunk {
  enum class Kind {
    content,     // carries generated text
    role_only,   // chat's first chunk: a role and no text (not a token)
    empty,       // no text (e.g. a finish_reason-only chunk)
    usage_only,  // choices empty, usage present (include_usage's last chunk)
    done,        // "[DONE]"
    error,       // {"error": ...} or {"object": "error", ...} mid-stream
    malformed,   // not JSON, or not an object
  };
  Kind kind = Kind::malformed;
  std::optional<std::uint64_t> completion_tokens;  // usage.completion_tokens (cumulative)
  std::optional<std::uint64_t> prompt_tokens;      // usage.prompt_tokens
  // usage.completion_tokens_details.reasoning_tokens (cumulative), where the server says it.
  std::optional<std::uint64_t> reasoning_tokens;
  // A content chunk whose text is reasoning only (delta.reasoning_content or delta.reasoning,
  // no visible delta.content): a token, but not one the user sees.
  bool reasoning = false;
  bool finished = false;      // a non-null finish_reason
  std::string error_message;  // for Kind::error (at most 200 bytes)
};

StreamChunk interpret_chunk(std::string_view data);

}  // namespace capsweep::llm

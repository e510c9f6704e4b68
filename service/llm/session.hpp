#pragma once
// Multi-turn sessions (workload.sessions): a session is a chat whose user sends turn k+1 a
// think time after turn k's answer ended, with the whole history, so the context grows turn
// by turn as in real chats. Here: the spec, one session's script (its user turns, lengths,
// think times and reference answers: a pure function of the seed and the session) and the
// conversation a turn sends. Pure; the load engine (loadgen/engine_session.cpp) sends them.

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/lengths.hpp"
#include "core/time.hpp"

namespace capsweep::llm {

// What the assistant's turns of the history are: the target's own streamed answers (`server`,
// as a chat client sends them) or the reference answers (`reference`: the dataset's assistant
// turns, or text of the turn's output length), which keep every session's prompts the same
// whatever the target answered. `server_state`: the server keeps the conversation (the
// Responses API's previous_response_id): a turn sends only its new messages and the id of the
// answer it continues, the server's context growing as with `server`.
enum class History { server, reference, server_state };
std::string_view to_string(History h) noexcept;

// The most turns one session may have (a session's turns share its index's 6 low bits).
inline constexpr std::uint32_t kMaxSessionTurns = 64;

// A session's shape: how its turns follow one another (llm/session_shapes.hpp, one row each).
// "chat" from the start: the user's scripted turns with the history; more by
// register_session_shape (their values follow chat's).
enum class SessionShape : std::uint8_t { chat };

// {"shape": a session shape's name (default "chat"), "turns": n | length distribution (1..64,
//  default 5; a dataset's conversations give their own), "think_time_ms": length distribution
//  (none: the next turn at once), "history": "server" | "reference" | "server_state", and the shape's own
//  fields, which its row checks}.
struct SessionSpec {
  SessionShape shape = SessionShape::chat;
  LengthDist turns = LengthDist::fixed(5);
  std::optional<LengthDist> think_time_ms;
  History history = History::server;
  // The shape's own fields, as given and checked by its row (null when none were given).
  std::shared_ptr<const nlohmann::json> options;
};
// Errors name the field; a shape's own fields are checked by its row.
Result<SessionSpec> parse_sessions(const nlohmann::json& j, const std::string& field);

// One user turn of a session: what the user writes, its length in tokens (expected), the
// answer's cap, the reference answer (history "reference"), and the think time before it
// (after the previous answer ended; 0 for the first turn).
struct SessionTurn {
  std::string user;
  std::uint32_t user_tokens = 0;
  std::uint32_t max_tokens = 1;
  std::string reference;
  std::uint32_t reference_tokens = 0;
  Nanos think_before{0};
};

// One session from start to end: a system prompt (a dataset conversation's; "" otherwise)
// and its turns in order.
struct SessionScript {
  std::string system;
  std::uint32_t system_tokens = 0;
  std::vector<SessionTurn> turns;
};

// The chat so far: the messages a turn sends. Tokens are what capsweep expects the target to
// count (the server's own count comes back in its usage).
class Conversation {
 public:
  explicit Conversation(std::string system = {}, std::uint32_t system_tokens = 0);
  void add_user(const std::string& text, std::uint32_t tokens);
  void add_assistant(const std::string& text, std::uint32_t tokens);
  // The chat API's messages: a JSON array text of {"role", "content"}, from message `from` on.
  std::string messages_json(std::size_t from = 0) const;
  // The completions API's prompt: every message's text, separated by blank lines.
  std::string as_prompt() const;
  std::uint32_t tokens() const noexcept { return tokens_; }
  std::size_t size() const noexcept { return messages_.size(); }

 private:
  struct Message {
    const char* role;
    std::string text;
  };
  std::vector<Message> messages_;
  std::uint32_t tokens_ = 0;
};

// A dataset item's chat messages (a JSON array text of {"role", "content"}) as a session's
// script: the system message(s) joined as its system prompt, each user message a turn, each
// assistant message the reference answer of the turn before it. Lengths are whitespace words
// times `tokens_per_word`; turns past kMaxSessionTurns are dropped.
SessionScript script_from_messages(std::string_view messages_json, double tokens_per_word);

}  // namespace capsweep::llm

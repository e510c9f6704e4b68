#pragma once
// The session shapes: one row per way a session's turns follow one another
// (workload.sessions.shape). A row checks the shape's own fields and starts a session's flow;
// the flow says, after each answered turn, what the next turn sends (the conversation so far,
// the answer's cap, the think time before it) or that the session ended. The load engine
// (loadgen/engine_session.cpp) drives every shape alike: it times, sends and counts the turns,
// ends a session whose turn failed, and never sends more than kMaxSessionTurns of one. Pure;
// no I/O.

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/time.hpp"
#include "llm/session.hpp"

namespace capsweep::llm {

class Workload;

// The next turn of a session: the answer's cap and the user's think time before it (after the
// answer before it ended; the first turn goes at the session's arrival).
struct NextTurn {
  std::uint32_t max_tokens = 1;
  Nanos think_before{0};
};

// What came back for a turn the engine sent and saw answered: its output tokens, and the SSE
// data payloads of its stream where the flow asked for them (wants_answer).
struct TurnAnswer {
  std::uint32_t output_tokens = 0;
  const std::vector<std::string>* events = nullptr;
};

// A turn of a conversation the server keeps (history "server_state"): the id of the answer it
// continues ("" for the first turn) and the first message of conversation() the server has
// not seen (the turn sends those only).
struct KeptTurn {
  std::string previous_id;
  std::size_t first_new = 0;
};

// One session from its start to its end, made by its shape's row.
class SessionFlow {
 public:
  virtual ~SessionFlow() = default;
  // The next turn after `last` (nullptr before the first turn): the conversation to send is
  // conversation() as it is when this returns. nullopt: the session ended.
  virtual std::optional<NextTurn> next(const TurnAnswer* last) = 0;
  virtual const Conversation& conversation() const = 0;
  // Whether the flow reads the answers' stream (the engine keeps it for the flow only then).
  virtual bool wants_answer() const { return false; }
  // Where the server keeps the conversation: what the next turn continues; nullopt where the
  // turn sends the whole conversation.
  virtual std::optional<KeptTurn> kept_turn() const { return std::nullopt; }
};

struct SessionShapeRow {
  std::string name;
  // The shape's own fields of workload.sessions (an object of the keys no common field took);
  // none: the shape has no fields of its own. An error names the field below `field`.
  std::function<std::optional<Error>(const nlohmann::json& own, const std::string& field)> check = {};
  // The JSON Schema properties of those fields (a JSON object's text; "" when none), added to
  // the spec schema's workload.sessions.
  std::string schema_properties;
  // Session `id`'s flow: a pure function of the workload, the id and the step's prompt salt
  // (and, where the flow reads them, of the answers).
  std::function<std::unique_ptr<SessionFlow>(const Workload& w, std::uint64_t id, std::uint64_t salt)> start = {};
  // The most turns a session of this shape sends (the agents' records and the prompt bound
  // at submit are held to it; at most kMaxSessionTurns) and their mean (a step's length is
  // sized by it); none: the spec's `turns`.
  std::function<std::uint32_t(const SessionSpec&)> most_turns = {};
  std::function<double(const SessionSpec&)> mean_turns = {};
};

// The row of a shape (chat's for a value no row has).
const SessionShapeRow& session_shape_row(SessionShape s) noexcept;
// Adds a shape to the table (at start-up, before specs are parsed); its value. Throws
// std::invalid_argument for a taken or empty name, a row that starts no flow, schema
// properties that are not a JSON object, or a full table.
SessionShape register_session_shape(SessionShapeRow row);
// Every shape's name, in the table's order (the spec schema's enum).
std::vector<std::string> session_shape_names();
std::string_view to_string(SessionShape s) noexcept;
std::optional<SessionShape> parse_session_shape(std::string_view name) noexcept;

// What a spec's shape says of its sessions' turns: the most (within kMaxSessionTurns) and the
// mean, by its row (the spec's `turns` where the row says nothing).
std::uint32_t most_session_turns(const SessionSpec& s);
double mean_session_turns(const SessionSpec& s);

// The chat shape's flow: the workload's script of session `id` (Workload::session), each turn
// sent with the history so far (the target's answers or the reference ones, by the spec's
// history).
std::unique_ptr<SessionFlow> chat_flow(const Workload& w, std::uint64_t id, std::uint64_t salt);

}  // namespace capsweep::llm

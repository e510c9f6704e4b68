// The session shape table: chat from the start, more by register_session_shape.
#include "llm/session_shapes.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/row_table.hpp"
#include "llm/answer.hpp"
#include "llm/workload.hpp"

namespace capsweep::llm {

namespace {

class ChatFlow final : public SessionFlow {
 public:
  ChatFlow(SessionScript script, History history)
      : script_(std::move(script)), chat_(script_.system, script_.system_tokens), history_(history) {}

  std::optional<NextTurn> next(const TurnAnswer* last) override {
    if (last && k_ > 0) {
      const SessionTurn& before = script_.turns[k_ - 1];
      if (history_ != History::reference && last->events) {
        const Answer a = assemble_answer(*last->events);
        chat_.add_assistant(a.text, last->output_tokens);
        kept_.previous_id = a.id;
        // An answer without an id cannot be continued: the next turn sends the whole history.
        kept_.first_new = a.id.empty() ? 0 : chat_.size();
      } else {
        chat_.add_assistant(before.reference, before.reference_tokens);
      }
    }
    if (k_ >= script_.turns.size()) return std::nullopt;
    const SessionTurn& turn = script_.turns[k_++];
    chat_.add_user(turn.user, turn.user_tokens);
    return NextTurn{.max_tokens = turn.max_tokens, .think_before = turn.think_before};
  }
  const Conversation& conversation() const override { return chat_; }
  bool wants_answer() const override { return history_ != History::reference; }
  std::optional<KeptTurn> kept_turn() const override {
    return history_ == History::server_state ? std::optional<KeptTurn>(kept_) : std::nullopt;
  }

 private:
  SessionScript script_;
  Conversation chat_;
  History history_;
  KeptTurn kept_;  // history server_state: what the next turn continues
  std::size_t k_ = 0;
};

SessionShapeRow chat_row() {
  SessionShapeRow r;
  r.name = "chat";
  r.start = chat_flow;
  return r;
}

RowTable<SessionShapeRow>& shape_table() {
  static RowTable<SessionShapeRow> t("session shape", {chat_row()});  // in SessionShape's order
  return t;
}

}  // namespace

std::uint32_t most_session_turns(const SessionSpec& s) {
  const SessionShapeRow& row = session_shape_row(s.shape);
  const std::uint32_t most = row.most_turns ? row.most_turns(s) : s.turns.upper_bound();
  return std::min(most, kMaxSessionTurns);
}

double mean_session_turns(const SessionSpec& s) {
  const SessionShapeRow& row = session_shape_row(s.shape);
  return row.mean_turns ? row.mean_turns(s) : s.turns.nominal_mean();
}

std::unique_ptr<SessionFlow> chat_flow(const Workload& w, std::uint64_t id, std::uint64_t salt) {
  const History history = w.spec().sessions ? w.spec().sessions->history : History::server;
  return std::make_unique<ChatFlow>(w.session(id, salt), history);
}

const SessionShapeRow& session_shape_row(SessionShape s) noexcept {
  return shape_table().at(static_cast<std::size_t>(s));
}

SessionShape register_session_shape(SessionShapeRow row) {
  if (row.name.empty() || !row.start) throw std::invalid_argument("a session shape needs a name and a flow");
  if (!row.schema_properties.empty() && !nlohmann::json::parse(row.schema_properties, nullptr, false).is_object()) {
    throw std::invalid_argument("a session shape's schema properties are a JSON object");
  }
  return static_cast<SessionShape>(shape_table().add(std::move(row)));
}

std::vector<std::string> session_shape_names() {
  return shape_table().names();
}

std::string_view to_string(SessionShape s) noexcept {
  return session_shape_row(s).name;
}

std::optional<SessionShape> parse_session_shape(std::string_view name) noexcept {
  const auto i = shape_table().find(name);
  return i ? std::optional<SessionShape>(static_cast<SessionShape>(*i)) : std::nullopt;
}

}  // namespace capsweep::llm

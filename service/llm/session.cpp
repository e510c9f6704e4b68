#include "llm/session.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/numeric.hpp"
#include "core/random.hpp"
#include "core/text.hpp"
#include "llm/session_shapes.hpp"
#include "llm/workload.hpp"

namespace capsweep::llm {

std::string_view to_string(History h) noexcept {
  switch (h) {
    case History::server:
      return "server";
    case History::reference:
      return "reference";
    case History::server_state:
      return "server_state";
  }
  return "server";
}

namespace {

Result<LengthDist> parse_turns(const nlohmann::json& value, const std::string& f) {
  if (value.is_number()) {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > kMaxSessionTurns) {
      return invalid(f, "must be an integer number of turns in [1, 64] or a length distribution");
    }
    return LengthDist::fixed(value.get<std::uint32_t>());
  }
  auto d = parse_length_dist(value, f);
  if (!d) return d.error();
  if (d->upper_bound() > kMaxSessionTurns) {
    return invalid(f, "a session has at most 64 turns: give the distribution a max of 64 or less");
  }
  return *d;
}

// The shape's row checks the fields no other key took.
Result<SessionSpec> with_shape(SessionSpec s, const nlohmann::json* shape, nlohmann::json own,
                               const std::string& field) {
  if (shape) {
    const auto found = shape->is_string() ? parse_session_shape(shape->get<std::string>()) : std::nullopt;
    if (!found)
      return invalid(field + "/shape", fmt::format("must be one of: {}", fmt::join(session_shape_names(), ", ")));
    s.shape = *found;
  }
  if (own.empty()) return s;
  const SessionShapeRow& row = session_shape_row(s.shape);
  if (!row.check) {
    return invalid(field + "/" + own.begin().key(),
                   "unknown sessions field (expected shape, turns, think_time_ms or history)");
  }
  if (auto e = row.check(own, field)) return *e;
  s.options = std::make_shared<const nlohmann::json>(std::move(own));
  return s;
}

}  // namespace

Result<SessionSpec> parse_sessions(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "must be an object such as {\"turns\": 5, \"history\": \"server\"}");
  SessionSpec s;
  const nlohmann::json* shape = nullptr;
  nlohmann::json own = nlohmann::json::object();
  for (const auto& [key, value] : j.items()) {
    const std::string f = field + "/" + key;
    if (key == "turns") {
      auto t = parse_turns(value, f);
      if (!t) return t.error();
      s.turns = *t;
    } else if (key == "think_time_ms") {
      auto d = parse_length_dist(value, f);
      if (!d) return d.error();
      s.think_time_ms = *d;
    } else if (key == "history") {
      if (value == "server") {
        s.history = History::server;
      } else if (value == "reference") {
        s.history = History::reference;
      } else if (value == "server_state") {
        s.history = History::server_state;
      } else {
        return invalid(f,
                       "must be \"server\" (the target's answers), \"reference\" (the reference answers) or "
                       "\"server_state\" (the conversation kept on the server)");
      }
    } else if (key == "shape") {
      shape = &value;
    } else {
      own[key] = value;
    }
  }
  return with_shape(std::move(s), shape, std::move(own), field);
}

Conversation::Conversation(std::string system, std::uint32_t system_tokens) {
  if (!system.empty()) {
    tokens_ = system_tokens;
    messages_.push_back({"system", std::move(system)});
  }
}

void Conversation::add_user(const std::string& text, std::uint32_t tokens) {
  messages_.push_back({"user", text});
  tokens_ = saturate<std::uint32_t>(double(tokens_) + tokens);
}

void Conversation::add_assistant(const std::string& text, std::uint32_t tokens) {
  messages_.push_back({"assistant", text});
  tokens_ = saturate<std::uint32_t>(double(tokens_) + tokens);
}

std::string Conversation::messages_json(std::size_t from) const {
  nlohmann::json a = nlohmann::json::array();
  for (std::size_t i = from; i < messages_.size(); ++i)
    a.push_back({{"role", messages_[i].role}, {"content", messages_[i].text}});
  return a.dump();
}

std::string Conversation::as_prompt() const {
  std::string out;
  for (const Message& m : messages_) {
    if (!out.empty()) out += "\n\n";
    out += m.text;
  }
  return out;
}

namespace {

std::uint32_t tokens_of(std::string_view text, double tokens_per_word) {
  return std::max<std::uint32_t>(1, saturate<std::uint32_t>(std::round(count_words(text) * tokens_per_word)));
}

}  // namespace

SessionScript script_from_messages(std::string_view messages_json, double tokens_per_word) {
  SessionScript s;
  const auto j = nlohmann::json::parse(messages_json, nullptr, false);
  if (!j.is_array()) return s;
  for (const auto& m : j) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_string()) continue;
    const std::string role = m.value("role", "");
    const std::string& text = m["content"].get_ref<const std::string&>();
    if (role == "system" || role == "developer") {
      if (!s.system.empty()) s.system += "\n\n";
      s.system += text;
    } else if (role == "user") {
      if (s.turns.size() == kMaxSessionTurns) break;
      SessionTurn t;
      t.user = text;
      t.user_tokens = tokens_of(text, tokens_per_word);
      s.turns.push_back(std::move(t));
    } else if (role == "assistant" && !s.turns.empty() && s.turns.back().reference.empty()) {
      s.turns.back().reference = text;
      s.turns.back().reference_tokens = tokens_of(text, tokens_per_word);
    }
  }
  if (!s.system.empty()) s.system_tokens = tokens_of(s.system, tokens_per_word);
  return s;
}

SessionScript Workload::session(std::uint64_t id, std::uint64_t salt) const {
  const SessionSpec& spec = spec_.sessions ? *spec_.sessions : SessionSpec{};
  Rng rng(splitmix64(spec_.seed ^ splitmix64(id ^ 0x5e5510)));
  Rng think_rng(splitmix64(spec_.seed ^ splitmix64(id ^ 0x7417)));
  SessionScript s;
  const bool from_dataset = !dataset_.empty();
  if (from_dataset) {
    const DatasetEntry& d = dataset_[entry_of(id)];
    if (!d.messages.empty()) {
      s = script_from_messages(d.messages, synth_.tokens_per_word());
    } else {
      // A single prompt: a session of one turn, its answer's length as the item gives it.
      SessionTurn t;
      t.user = d.prompt;
      t.user_tokens = tokens_of(d.prompt, synth_.tokens_per_word());
      if (d.output_tokens) {
        t.reference_tokens = *d.output_tokens;
      } else if (d.max_tokens) {
        t.reference_tokens = *d.max_tokens;
      } else if (d.reference_output_words > 0) {
        t.reference_tokens = std::max<std::uint32_t>(
            1, saturate<std::uint32_t>(std::round(d.reference_output_words * synth_.tokens_per_word())));
      }
      s.turns.push_back(std::move(t));
    }
  } else {
    s.turns.resize(spec.turns.sample(rng));
  }
  const bool lengths_from_dataset = from_dataset && (!spec_.dataset || spec_.dataset->output_from_dataset);
  for (std::size_t k = 0; k < s.turns.size(); ++k) {
    SessionTurn& t = s.turns[k];
    // Turn 1 carries the session's shared prefix (if any); the others are text of their own.
    const std::uint64_t index = k == 0 ? id : splitmix64(id ^ 0x7a11) + k;
    if (!from_dataset) {
      t.user_tokens = spec_.prompt_tokens.sample(rng);
      t.user =
          k == 0 ? synth_.make(t.user_tokens, index, salt) : synth_.make_from_blocks({}, 0, t.user_tokens, index, salt);
    }
    if (lengths_from_dataset && t.reference_tokens > 0) {
      t.max_tokens = t.reference_tokens;
    } else {
      t.max_tokens = spec_.output_tokens.sample(rng);
    }
    if (t.reference.empty()) {
      // No reference answer given: text of the answer's length stands for it.
      t.reference = synth_.make_from_blocks({}, 0, t.max_tokens, splitmix64(index ^ 0xa25e), salt);
      t.reference_tokens = t.max_tokens;
    }
    if (k > 0 && spec.think_time_ms) t.think_before = std::chrono::milliseconds(spec.think_time_ms->sample(think_rng));
  }
  return s;
}

}  // namespace capsweep::llm

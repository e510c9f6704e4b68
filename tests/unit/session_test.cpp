// Multi-turn sessions: the spec's sessions object, a dataset conversation as a script, a
// session's script as a pure function of the seed and its index, and the conversation a turn
// sends.

#include "llm/session.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "core/text.hpp"
#include "llm/session_shapes.hpp"
#include "llm/workload.hpp"

using namespace capsweep;
using namespace capsweep::llm;
using json = nlohmann::json;

TEST_CASE("sessions: the spec's sessions object parses, with its defaults") {
  auto s = parse_sessions(json::object(), "/workload/sessions").value();
  CHECK(s.turns.upper_bound() == 5);
  CHECK_FALSE(s.think_time_ms.has_value());
  CHECK(s.history == History::server);
  s = parse_sessions(json::parse(R"({"turns": 3, "think_time_ms": {"dist": "uniform", "min": 100, "max": 900},
                                     "history": "reference"})"),
                     "/workload/sessions")
          .value();
  CHECK(s.turns.upper_bound() == 3);
  REQUIRE(s.think_time_ms.has_value());
  CHECK(s.think_time_ms->upper_bound() == 900);
  CHECK(s.history == History::reference);
  CHECK(to_string(s.history) == "reference");
  s = parse_sessions(json::parse(R"({"turns": {"dist": "uniform", "min": 2, "max": 64}})"), "/s").value();
  CHECK(s.turns.upper_bound() == 64);
  CHECK(parse_sessions(json::parse(R"({"turns": 64})"), "/s").value().turns.upper_bound() == 64);
  s = parse_sessions(json::parse(R"({"history": "server_state"})"), "/s").value();
  CHECK(s.history == History::server_state);
  CHECK(to_string(s.history) == "server_state");
}

TEST_CASE("sessions: a bad sessions object's error names the field") {
  for (const auto& [text, field] : std::vector<std::pair<std::string, std::string>>{
           {R"([])", "/workload/sessions"},
           {R"(5)", "/workload/sessions"},
           {R"({"turns": 0})", "/workload/sessions/turns"},
           {R"({"turns": 65})", "/workload/sessions/turns"},
           {R"({"turns": -1})", "/workload/sessions/turns"},
           {R"({"turns": 1.5})", "/workload/sessions/turns"},
           {R"({"turns": "five"})", "/workload/sessions/turns"},
           {R"({"turns": {"dist": "uniform", "min": 1, "max": 65}})", "/workload/sessions/turns"},
           {R"({"think_time_ms": {"dist": "fixed"}})", "/workload/sessions/think_time_ms"},
           {R"({"history": "mine"})", "/workload/sessions/history"},
           {R"({"history": 1})", "/workload/sessions/history"},
           {R"({"think_ms": 5})", "/workload/sessions/think_ms"}}) {
    INFO(text);
    auto s = parse_sessions(json::parse(text), "/workload/sessions");
    REQUIRE_FALSE(s.has_value());
    CHECK(s.error().field.rfind(field, 0) == 0);
    CHECK_FALSE(s.error().message.empty());
  }
}

TEST_CASE("sessions: the workload's sessions field parses, and a dataset gives its own turns") {
  auto w = parse_workload(json::parse(R"({"prompt_tokens": {"dist": "fixed", "value": 20},
      "output_tokens": {"dist": "fixed", "value": 10}, "sessions": {"turns": 4}})"))
               .value();
  REQUIRE(w.sessions.has_value());
  CHECK(w.sessions->turns.upper_bound() == 4);
  auto bad = parse_workload(json::parse(R"({"sessions": {"history": "x"}})"));
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().field == "/workload/sessions/history");
}

TEST_CASE("sessions: a conversation's messages become a script: system, user turns, reference answers") {
  const auto s = script_from_messages(R"([{"role": "system", "content": "be brief"},
      {"role": "user", "content": "one two three"}, {"role": "assistant", "content": "four five"},
      {"role": "user", "content": "six"}, {"role": "assistant", "content": "seven eight nine ten"},
      {"role": "assistant", "content": "ignored second answer"}, {"role": "user", "content": "eleven twelve"},
      {"role": "tool", "content": "not a turn"}, {"content": 5}])",
                                      2.0);
  CHECK(s.system == "be brief");
  CHECK(s.system_tokens == 4);
  REQUIRE(s.turns.size() == 3);
  CHECK(s.turns[0].user == "one two three");
  CHECK(s.turns[0].user_tokens == 6);
  CHECK(s.turns[0].reference == "four five");
  CHECK(s.turns[0].reference_tokens == 4);
  CHECK(s.turns[1].reference == "seven eight nine ten");
  CHECK(s.turns[2].user == "eleven twelve");
  CHECK(s.turns[2].reference.empty());
  // Not an array of messages: no turns.
  CHECK(script_from_messages("{}", 1.0).turns.empty());
  CHECK(script_from_messages("not json", 1.0).turns.empty());
  // Turns past the most a session may have are dropped.
  json many = json::array();
  for (int i = 0; i < 70; ++i) many.push_back({{"role", "user"}, {"content", "hi"}});
  CHECK(script_from_messages(many.dump(), 1.0).turns.size() == kMaxSessionTurns);
}

TEST_CASE("sessions: a conversation grows by each turn and answer, as chat messages or one prompt") {
  Conversation c("sys", 1);
  CHECK(c.size() == 1);
  c.add_user("a b", 2);
  c.add_assistant("c d e", 3);
  c.add_user("f", 1);
  CHECK(c.tokens() == 1 + 2 + 3 + 1);
  const auto m = json::parse(c.messages_json());
  REQUIRE(m.size() == 4);
  CHECK(m[0] == json{{"role", "system"}, {"content", "sys"}});
  CHECK(m[2] == json{{"role", "assistant"}, {"content", "c d e"}});
  CHECK(m[3]["role"] == "user");
  CHECK(c.as_prompt() == "sys\n\na b\n\nc d e\n\nf");
  Conversation bare;
  CHECK(bare.size() == 0);
  CHECK(bare.messages_json() == "[]");
  // From a message on: what a server that kept the rest has not seen.
  const auto tail = json::parse(c.messages_json(3));
  REQUIRE(tail.size() == 1);
  CHECK(tail[0] == json{{"role", "user"}, {"content", "f"}});
  CHECK(c.messages_json(4) == "[]");
  CHECK(c.messages_json(9) == "[]");
}

namespace {

// A Responses stream's events naming its answer `id` and saying `text`.
std::vector<std::string> responses_answer(const std::string& id, const std::string& text) {
  return {json{{"type", "response.created"}, {"response", {{"id", id}, {"output", json::array()}}}}.dump(),
          json{{"type", "response.output_text.delta"}, {"output_index", 0}, {"delta", text}}.dump(),
          json{{"type", "response.completed"}, {"response", {{"id", id}, {"status", "completed"}}}}.dump()};
}

Workload session_workload(History h) {
  WorkloadSpec spec;
  spec.prompt_tokens = LengthDist::fixed(10);
  spec.output_tokens = LengthDist::fixed(4);
  SessionSpec ss;
  ss.turns = LengthDist::fixed(3);
  ss.history = h;
  spec.sessions = ss;
  return Workload(spec, PromptSynth(1.0));
}

}  // namespace

TEST_CASE("sessions: history server_state sends each turn's new messages and continues the answer before it") {
  const Workload w = session_workload(History::server_state);
  auto flow = chat_flow(w, 0, 0);
  CHECK(flow->wants_answer());
  REQUIRE(flow->next(nullptr));
  auto kept = flow->kept_turn();
  REQUIRE(kept.has_value());
  CHECK(kept->previous_id.empty());  // the first turn continues nothing
  CHECK(kept->first_new == 0);
  auto events = responses_answer("resp_1", "one two three four");
  TurnAnswer a{.output_tokens = 4, .events = &events};
  REQUIRE(flow->next(&a));
  kept = flow->kept_turn();
  REQUIRE(kept.has_value());
  CHECK(kept->previous_id == "resp_1");
  const auto sent = json::parse(flow->conversation().messages_json(kept->first_new));
  REQUIRE(sent.size() == 1);  // the new user turn alone
  CHECK(sent[0]["role"] == "user");
  // The context the server holds still grows: both turns and the answer.
  CHECK(flow->conversation().tokens() == 10 + 4 + 10);
  CHECK(flow->conversation().size() == 3);
  // An answer without an id cannot be continued: the whole conversation goes again.
  std::vector<std::string> anonymous = {R"({"type":"response.output_text.delta","delta":"x"})"};
  TurnAnswer b{.output_tokens = 1, .events = &anonymous};
  REQUIRE(flow->next(&b));
  kept = flow->kept_turn();
  REQUIRE(kept.has_value());
  CHECK(kept->previous_id.empty());
  CHECK(kept->first_new == 0);
  // The other histories send the whole conversation.
  CHECK_FALSE(chat_flow(session_workload(History::server), 0, 0)->kept_turn().has_value());
  CHECK_FALSE(chat_flow(session_workload(History::reference), 0, 0)->kept_turn().has_value());
}

TEST_CASE("sessions: a session's script is a pure function of the seed and its index") {
  WorkloadSpec spec;
  spec.prompt_tokens = LengthDist::fixed(30);
  spec.output_tokens = LengthDist::fixed(12);
  spec.seed = 7;
  SessionSpec ss;
  ss.turns = LengthDist::uniform(2, 6).value();
  ss.think_time_ms = LengthDist::fixed(250);
  spec.sessions = ss;
  const Workload w(spec, PromptSynth(1.0));
  std::set<std::size_t> lengths;
  std::set<std::string> first_turns;
  for (std::uint64_t id = 0; id < 100; ++id) {
    const SessionScript s = w.session(id, 0);
    REQUIRE(s.turns.size() >= 2);
    REQUIRE(s.turns.size() <= 6);
    lengths.insert(s.turns.size());
    first_turns.insert(s.turns[0].user);
    for (std::size_t k = 0; k < s.turns.size(); ++k) {
      const SessionTurn& t = s.turns[k];
      CHECK(t.user_tokens == 30);
      CHECK(count_words(t.user) == 30);
      CHECK(t.max_tokens == 12);
      CHECK(t.reference_tokens == 12);
      CHECK(count_words(t.reference) == 12);
      CHECK(t.think_before == (k == 0 ? Nanos{0} : std::chrono::milliseconds(250)));
    }
    CHECK(s.turns[0].user != s.turns[1].user);
  }
  CHECK(lengths.size() == 5);        // every length of 2..6 drawn
  CHECK(first_turns.size() == 100);  // every session its own text
  // The same seed, the same session; another seed or salt, another text.
  const Workload again(spec, PromptSynth(1.0));
  CHECK(again.session(42, 0).turns[1].user == w.session(42, 0).turns[1].user);
  CHECK(w.session(42, 1).turns[0].user != w.session(42, 0).turns[0].user);
  // The text's seed is the synthesizer's (as the service makes it: the workload's seed).
  const Workload seeded(spec, PromptSynth(1.0, 0, 8));
  CHECK(seeded.session(42, 0).turns[0].user != w.session(42, 0).turns[0].user);
  CHECK(seeded.session(42, 0).turns[1].user != w.session(42, 0).turns[1].user);
}

TEST_CASE("sessions: a dataset's conversations are the sessions' scripts, a single prompt one turn") {
  WorkloadSpec spec;
  spec.output_tokens = LengthDist::fixed(9);
  spec.sessions = SessionSpec{};
  DatasetEntry chat;
  chat.messages = R"([{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi you"},
      {"role": "user", "content": "how are things"}])";
  DatasetEntry single;
  single.prompt = "just one question";
  single.output_tokens = 4;
  const Workload w(spec, PromptSynth(1.0), {chat, single});
  bool saw_chat = false, saw_single = false;
  for (std::uint64_t id = 0; id < 20; ++id) {
    const SessionScript s = w.session(id, 0);
    if (s.turns.size() == 2) {
      saw_chat = true;
      CHECK(s.turns[0].user == "hello there");
      CHECK(s.turns[0].reference == "hi you");
      CHECK(s.turns[1].user == "how are things");
      CHECK(count_words(s.turns[1].reference) == s.turns[1].reference_tokens);  // synthesized
    } else {
      REQUIRE(s.turns.size() == 1);
      saw_single = true;
      CHECK(s.turns[0].user == "just one question");
      CHECK(s.turns[0].user_tokens == 3);
    }
  }
  CHECK(saw_chat);
  CHECK(saw_single);
}

// A new session shape added through the session shape table alone: this file registers
// "relay" (the first turn is the workload's prompt; each later turn asks the model to repeat
// its previous answer, so what is sent depends on what came back; "relay_turns" turns in all)
// and runs a check job of relay sessions through the real API, the job manager and the store
// to a stored verdict — on capsweepd's engine and on two load agents (in this process, so
// they know the row too). Nothing outside this file knows the shape: the schema's enum and
// its field, the parser and the engine's turns all come from its row.

#include <catch2/catch.hpp>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "integration/llmsim_fixture.hpp"
#include "llm/answer.hpp"
#include "llm/session_shapes.hpp"
#include "llm/workload.hpp"
#include "support/service_fixture.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

constexpr const char* kRepeat = "Repeat exactly: ";

class RelayFlow final : public llm::SessionFlow {
 public:
  RelayFlow(llm::SessionScript script, std::uint32_t turns) : script_(std::move(script)), turns_(turns) {}

  std::optional<llm::NextTurn> next(const llm::TurnAnswer* last) override {
    if (k_ == turns_ || script_.turns.empty()) return std::nullopt;
    const llm::SessionTurn& first = script_.turns.front();
    if (k_++ == 0) {
      chat_.add_user(first.user, first.user_tokens);
    } else {
      const std::string said = last && last->events ? llm::assemble_answer(*last->events).text : std::string();
      chat_.add_assistant(said, last ? last->output_tokens : 0);
      chat_.add_user(kRepeat + said, last ? last->output_tokens + 3 : 3);
    }
    return llm::NextTurn{.max_tokens = first.max_tokens};
  }
  const llm::Conversation& conversation() const override { return chat_; }
  bool wants_answer() const override { return true; }

 private:
  llm::SessionScript script_;
  llm::Conversation chat_;
  std::uint32_t turns_;
  std::uint32_t k_ = 0;
};

std::uint32_t relay_turns(const std::shared_ptr<const json>& options) {
  return options ? options->value("relay_turns", 2u) : 2u;
}

llm::SessionShapeRow relay_row() {
  llm::SessionShapeRow row;
  row.name = "relay";
  row.check = [](const json& own, const std::string& field) -> std::optional<Error> {
    for (const auto& [key, value] : own.items()) {
      if (key != "relay_turns") return Error{errc::invalid_argument, "unknown relay field", field + "/" + key};
      if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > 8) {
        return Error{errc::invalid_argument, "must be an integer in [1, 8]", field + "/relay_turns"};
      }
    }
    return std::nullopt;
  };
  row.schema_properties = R"({"relay_turns": {"type": "integer", "minimum": 1, "maximum": 8}})";
  row.start = [](const llm::Workload& w, std::uint64_t id, std::uint64_t salt) {
    return std::make_unique<RelayFlow>(w.session(id, salt), relay_turns(w.spec().sessions->options));
  };
  row.most_turns = [](const llm::SessionSpec& s) { return relay_turns(s.options); };
  row.mean_turns = [](const llm::SessionSpec& s) { return static_cast<double>(relay_turns(s.options)); };
  return row;
}

llm::SessionShape registered() {
  static const llm::SessionShape shape = llm::register_session_shape(relay_row());
  return shape;
}

json relay_job(const json& sessions) {
  return {{"kind", "check"},
          {"target", {{"base_url", "http://127.0.0.1:9"}, {"model", "m"}, {"api", "chat"}}},
          {"workload",
           {{"prompt_tokens", {{"dist", "fixed"}, {"value", 8}}},
            {"output_tokens", {{"dist", "fixed"}, {"value", 4}}},
            {"sessions", sessions}}},
          {"slo", {{"ttft_ms", {{"p95", 800}}}}},
          {"check", {{"rate_rps", 40}, {"duration_s", 3}, {"warmup_s", 0}}}};
}

// What the fake model was sent, and its answers: "heard <n>" for a body of n bytes.
struct Heard {
  std::mutex m;
  std::vector<json> bodies;
};

testing::FakeModel recording_model(Heard& heard) {
  testing::FakeModel model;
  model.ttft = 5ms;
  model.itl = 2ms;
  model.answer = [&heard](const std::string& body) {
    {
      std::lock_guard lock(heard.m);
      heard.bodies.push_back(json::parse(body));
    }
    const json delta = {
        {"choices", json::array({{{"index", 0}, {"delta", {{"content", "heard " + std::to_string(body.size())}}}}})}};
    return std::vector<std::string>{delta.dump()};
  };
  return model;
}

}  // namespace

TEST_CASE("session shapes: a shape registered from one file parses, with its own field checked by its row") {
  const llm::SessionShape relay = registered();
  CHECK(llm::to_string(relay) == "relay");
  CHECK(llm::to_string(llm::SessionShape::chat) == "chat");
  // The row, not the spec's turns, says how many turns its sessions send.
  CHECK(llm::most_session_turns(*llm::parse_sessions({{"shape", "relay"}, {"relay_turns", 7}}, "/w")) == 7);
  CHECK(llm::most_session_turns(*llm::parse_sessions({{"turns", 4}}, "/w")) == 4);
  auto s = llm::parse_sessions({{"shape", "relay"}, {"relay_turns", 3}}, "/workload/sessions");
  REQUIRE(s.has_value());
  CHECK(s->shape == relay);
  REQUIRE(s->options);
  CHECK(s->options->value("relay_turns", 0) == 3);
  CHECK(llm::parse_sessions({{"turns", 2}}, "/w")->shape == llm::SessionShape::chat);
  CHECK_FALSE(llm::parse_sessions({{"turns", 2}}, "/w")->options);

  const auto bad = llm::parse_sessions({{"shape", "relay"}, {"relay_turns", 0}}, "/workload/sessions");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().field == "/workload/sessions/relay_turns");
  // Another shape's field is unknown to chat; an unknown shape names the table's shapes.
  const auto chat = llm::parse_sessions({{"relay_turns", 2}}, "/workload/sessions");
  REQUIRE_FALSE(chat.has_value());
  CHECK(chat.error().field == "/workload/sessions/relay_turns");
  const auto unknown = llm::parse_sessions({{"shape", "relays"}}, "/workload/sessions");
  REQUIRE_FALSE(unknown.has_value());
  CHECK(unknown.error().field == "/workload/sessions/shape");
  CHECK(unknown.error().message.find("relay") != std::string::npos);
  CHECK_FALSE(llm::parse_sessions({{"shape", 3}}, "/w").has_value());
}

TEST_CASE("session shapes: the table refuses a taken name, a row without a flow, or a bad schema") {
  registered();
  CHECK_THROWS_AS(llm::register_session_shape(relay_row()), std::invalid_argument);
  llm::SessionShapeRow chat = relay_row();
  chat.name = "chat";
  CHECK_THROWS_AS(llm::register_session_shape(chat), std::invalid_argument);
  llm::SessionShapeRow no_flow;
  no_flow.name = "no_flow";
  CHECK_THROWS_AS(llm::register_session_shape(no_flow), std::invalid_argument);
  llm::SessionShapeRow bad_schema = relay_row();
  bad_schema.name = "bad_schema";
  bad_schema.schema_properties = "[1]";
  CHECK_THROWS_AS(llm::register_session_shape(bad_schema), std::invalid_argument);
}

TEST_CASE("session shapes: a registered shape runs through the API to a stored verdict, its turns as its flow says") {
  registered();
  Heard heard;
  testing::Service s("session-shapes", recording_model(heard));

  // The schema knows the shape and its field from the row.
  auto r = s.call("POST", "/v1/sweeps", relay_job({{"shape", "relay"}, {"relay_turns", 9}}).dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/workload/sessions/relay_turns");
  r = s.call("POST", "/v1/sweeps", relay_job({{"shape", "relayed"}}).dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/workload/sessions/shape");
  r = s.call("POST", "/v1/sweeps", relay_job({{"relay_turns", 2}}).dump());  // chat's sessions
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/workload/sessions/relay_turns");
  // Nothing of the refused specs was stored, and the service goes on serving.
  r = s.call("GET", "/v1/sweeps");
  REQUIRE(r.status == 200);
  CHECK(json::parse(r.body)["sweeps"].empty());

  const json step = s.run_check(relay_job({{"shape", "relay"}, {"relay_turns", 3}}), 0);
  CHECK(step["job_verdict"] == "pass");
  const json& sessions = step["summary"]["sessions"];
  INFO(sessions.dump());
  CHECK(sessions["shape"] == "relay");
  const int started = sessions["started"].get<int>(), completed = sessions["completed"].get<int>();
  const int sent = sessions["turns_sent"].get<int>();
  CHECK(started >= 60);
  // Every session ran its three turns, but one whose next turn fell after the step's end (cut).
  CHECK(sessions["broken"] == 0);
  CHECK(completed + sessions["cut"].get<int>() == started);
  CHECK(completed >= started - 5);
  CHECK(sent >= 3 * completed);
  CHECK(sent <= 3 * started);

  // Each later turn repeats the answer before it, as the flow built it from the stream.
  std::lock_guard lock(heard.m);
  int relayed = 0;
  for (const json& body : heard.bodies) {
    const json& m = body["messages"];
    if (m.size() < 3) continue;
    const std::string said = m[m.size() - 2].value("content", "");
    CHECK(said.rfind("heard ", 0) == 0);
    CHECK(m.back().value("content", "") == kRepeat + said);
    ++relayed;
  }
  CHECK(relayed == sent - started);  // every turn after a session's first
}

TEST_CASE("session shapes: a registered shape on two agents runs the local run's schedule to the same verdict") {
  registered();
  testing::SimFixture sim(testing::fast_sim());
  testing::Service s("session-shapes-agents", std::nullopt, true);
  // 20 sessions a second of six turns each: 120 turns a second, well inside what one engine
  // part keeps to its schedule even in a sanitizer build on a loaded machine.
  json spec = relay_job({{"shape", "relay"}, {"relay_turns", 6}});
  spec["check"]["rate_rps"] = 20;
  spec["target"]["base_url"] = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  spec["target"]["model"] = "sim-8b";
  const auto [local, shared] = s.local_and_on_agents(spec, 2);
  for (const json& step : {local, shared}) {
    const json& sessions = step["summary"]["sessions"];
    INFO(sessions.dump());
    CHECK(sessions["shape"] == "relay");
    // The same sessions began (one schedule); each sent the row's six turns (more than the
    // spec's default five: the row, not the turns field, bounds them), but one cut at the end.
    CHECK(sessions["started"] == local["summary"]["sessions"]["started"]);
    CHECK(sessions["broken"] == 0);
    const int started = sessions["started"].get<int>(), completed = sessions["completed"].get<int>();
    CHECK(completed >= started - 5);
    CHECK(sessions["turns_sent"].get<int>() >= 6 * completed);
    CHECK(sessions["turns_sent"].get<int>() <= 6 * started);
  }
}

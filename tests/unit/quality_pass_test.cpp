// A quality step apart from its I/O: which checks apply to which items, the verdict of each
// item, the step's tally, what a dataset must hold for a check, and the judge's prompt.
#include "sweep/quality_pass.hpp"

#include <catch2/catch.hpp>

#include "loadgen/quality_runner.hpp"

using namespace capsweep;
using namespace capsweep::sweep;
using json = nlohmann::json;

namespace {

llm::DatasetEntry item(const std::string& prompt, const json& quality, std::optional<std::uint32_t> max_tokens = {}) {
  llm::DatasetEntry e;
  e.prompt = prompt;
  e.quality = quality.empty() ? "" : quality.dump();
  e.max_tokens = max_tokens;
  return e;
}

loadgen::QualityReply reply(const std::string& content, const std::string& finish, std::uint64_t tokens,
                            Outcome outcome = Outcome::ok) {
  loadgen::QualityReply r;
  r.asked = true;
  r.record.outcome = outcome;
  r.events = {json{{"choices", {{{"delta", {{"content", content}}}, {"finish_reason", finish}}}},
                   {"usage", {{"completion_tokens", tokens}}}}
                  .dump()};
  return r;
}

}  // namespace

TEST_CASE("quality pass: each check judges the items it applies to, and failed requests fail them") {
  QualitySettings q;
  q.checks = {QualityCheck::json, QualityCheck::max_length, QualityCheck::accuracy, QualityCheck::determinism};
  q.max_tokens = 16;
  const std::vector<llm::DatasetEntry> entries{
      item("a", {{"response_format", {{"type", "json_object"}}}}),
      item("b", {{"response_format", {{"type", "json_object"}}}}),
      item("c", {{"expect", {{"answer", "42"}}}}, 4),
      item("d", {{"expect", {{"regex", "^4[0-9]$"}}}}),
      item("e", json::object()),
  };
  std::vector<loadgen::QualityReply> replies{
      reply("{\"x\": 1}", "stop", 5),      reply("```json\n{}\n```", "stop", 6), reply("42", "stop", 1),
      reply("", "", 0, Outcome::http_5xx), reply("words words", "length", 20),  // past its 16 tokens
  };
  const JudgedQuality j = judge_quality(q, Role::candidate, 0, entries, replies, {});
  CHECK(j.answered == 4);
  CHECK(j.failed == 1);
  const json& c = j.summary["checks"];
  CHECK(c["json"] == json({{"n", 2}, {"ok", 1}}));
  CHECK(c["max_length"] == json({{"n", 5}, {"ok", 3}}));  // the failed request and the overrun fail it
  CHECK(c["accuracy"] == json({{"n", 2}, {"ok", 1}}));
  CHECK_FALSE(c.contains("determinism"));  // judged across passes, from the answers' hashes
  REQUIRE(j.summary["answers"].size() == 5);
  CHECK(j.summary["answers"][3] == "");  // not answered
  CHECK(j.summary["answers"][0].get<std::string>().size() == 16);
  CHECK(j.summary["role"] == "candidate");
  REQUIRE(j.items.size() == 5);
  CHECK(j.items[1].verdicts["json"]["ok"] == false);
  CHECK(j.items[1].verdicts["json"]["reason"] == "the JSON is wrapped in a code fence");
  CHECK(j.items[2].max_tokens == 4);
  CHECK(j.items[3].outcome == "http_5xx");
  CHECK(j.items[3].verdicts["accuracy"]["reason"] == "no answer (http_5xx)");
  CHECK(j.items[4].verdicts["max_length"]["reason"] == "20 tokens exceed max_tokens 16");
  CHECK_FALSE(j.items[4].verdicts.contains("json"));  // not a JSON item
}

TEST_CASE("quality pass: schema and tool-call checks use the item's schema and tools") {
  QualitySettings q;
  q.checks = {QualityCheck::json_schema, QualityCheck::tool_calls};
  const json schema{{"type", "object"}, {"required", {"n"}}, {"properties", {{"n", {{"type", "integer"}}}}}};
  const json tools =
      json::array({{{"type", "function"},
                    {"function", {{"name", "f"}, {"parameters", {{"type", "object"}, {"required", {"x"}}}}}}}});
  const std::vector<llm::DatasetEntry> entries{
      item("s1", {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}}),
      item("s2", {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", schema}}}}}}),
      item("t1", {{"tools", tools}, {"tool_choice", "required"}}),
      item("t2", {{"tools", tools}, {"tool_choice", "required"}}),
  };
  loadgen::QualityReply call = reply("", "tool_calls", 3);
  call.events = {json{
      {"choices",
       {{{"delta", {{"tool_calls", {{{"index", 0}, {"function", {{"name", "f"}, {"arguments", "{\"x\": 1}"}}}}}}}}}}}}
                     .dump()};
  loadgen::QualityReply bad_call = call;
  bad_call.events = {json{
      {"choices",
       {{{"delta", {{"tool_calls", {{{"index", 0}, {"function", {{"name", "f"}, {"arguments", "{\"y\": 1}"}}}}}}}}}}}}
                         .dump()};
  std::vector<loadgen::QualityReply> replies{reply("{\"n\": 3}", "stop", 3), reply("{\"n\": \"3\"}", "stop", 3), call,
                                             bad_call};
  const JudgedQuality j = judge_quality(q, Role::baseline, 1, entries, replies, {});
  CHECK(j.summary["checks"]["json_schema"] == json({{"n", 2}, {"ok", 1}}));
  CHECK(j.summary["checks"]["tool_calls"] == json({{"n", 2}, {"ok", 1}}));
  CHECK(j.summary["pass"] == 1);
  CHECK(j.items[2].tool_calls[0]["name"] == "f");
}

TEST_CASE("quality pass: a dataset without the items a check needs is named - a judge needs references") {
  QualitySettings q;
  q.checks = {QualityCheck::max_length, QualityCheck::tool_calls};
  const std::vector<llm::DatasetEntry> plain{item("a", json::object())};
  auto e = quality_items_problem(q, plain, false);
  REQUIRE(e.has_value());
  CHECK(e->field == "/quality/checks/1");
  CHECK(e->message.find("tools") != std::string::npos);
  q.checks = {QualityCheck::max_length};
  CHECK_FALSE(quality_items_problem(q, plain, false).has_value());
  CHECK(quality_items_problem(q, plain, true)->field == "/judge");
  CHECK(quality_items_problem(q, {}, false)->field == "/quality/dataset");
  q.max_items = 1;
  const std::vector<llm::DatasetEntry> late{item("a", json::object()), item("b", {{"expect", {{"answer", "x"}}}})};
  q.checks = {QualityCheck::accuracy};
  CHECK(quality_items_problem(q, late, false).has_value());  // the only expect item is not asked
  CHECK(quality_item_count(q, 2) == 1);
}

TEST_CASE("quality pass: the judge's prompt fills each placeholder once and never re-reads what it inserted") {
  const auto e = item("What is 2 + 2?", {{"expect", {{"answer", "4"}}}});
  CHECK(judge_prompt("Q: {question}\nR: {reference}\nA: {answer}\nScore 1-10:", e, "{question} 5") ==
        "Q: What is 2 + 2?\nR: 4\nA: {question} 5\nScore 1-10:");
  CHECK(judge_reference(item("x", {{"expect", {{"contains", "Paris"}}}})) == "Paris");
  CHECK(judge_reference(item("x", json::object())).empty());
}

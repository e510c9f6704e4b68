// Quality checks on finished answers: JSON, tool calls, length, expected answers.
#include "core/quality.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;
using json = nlohmann::json;

TEST_CASE("quality: a JSON answer is one object, and fences, arrays and prose fail with the reason") {
  CHECK(check_json_answer(" {\"a\": 1}\n").ok);
  CHECK(answer_json("{\"a\": [1, 2]}")->at("a").size() == 2);
  const auto fenced = check_json_answer("```json\n{\"a\": 1}\n```");
  CHECK_FALSE(fenced.ok);
  CHECK(fenced.reason == "the JSON is wrapped in a code fence");
  CHECK(check_json_answer("[1, 2]").reason == "the answer is JSON but not an object");
  CHECK(check_json_answer("Sure! {\"a\": 1}").reason == "the answer does not parse as JSON");
  CHECK(check_json_answer("{\"a\": 1").reason == "the answer does not parse as JSON");
  CHECK(check_json_answer("  ").reason == "the answer is empty");
  CHECK_FALSE(answer_json("[1]").has_value());
}

TEST_CASE("quality: tool calls name an offered tool and carry JSON-object arguments") {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time"}}])");
  CHECK(check_tool_calls({{"get_weather", R"({"city": "Oslo"})"}}, tools).ok);
  CHECK(check_tool_calls({}, tools).ok);  // auto: no call is fine
  CHECK(check_tool_calls({}, tools, "required").reason == "a tool call was required and none was made");
  CHECK(check_tool_calls({{"get_stock", "{}"}}, tools).reason == "call 0 names 'get_stock', which was not offered");
  CHECK(check_tool_calls({{"get_weather", R"({"city": "Oslo")"}}, tools).reason ==
        "call 0's arguments do not parse as JSON");
  CHECK(check_tool_calls({{"get_time", "[]"}}, tools).reason == "call 0's arguments are not a JSON object");
  const json forced = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
  CHECK(check_tool_calls({{"get_weather", "{}"}}, tools, forced).reason ==
        "call 0 names 'get_weather', but 'get_time' was asked for");
  CHECK(tool_parameters(tools, "get_weather")["required"][0] == "city");
  CHECK(tool_parameters(tools, "get_time").is_null());
  CHECK(tool_parameters(tools, "nope").is_null());
}

TEST_CASE("quality: the length respects max_tokens and agrees with finish_reason") {
  CHECK(check_length(10, 64, "stop").ok);
  CHECK(check_length(64, 64, "length").ok);
  CHECK(check_length(64, 64, "stop").ok);
  CHECK(check_length(65, 64, "length").reason == "65 tokens exceed max_tokens 64");
  CHECK(check_length(12, 64, "length").reason == "finish_reason is length after 12 of 64 tokens");
  CHECK(check_length(12, 64, "").reason == "the answer has no finish_reason");
}

TEST_CASE("quality: expected answers match exactly, by substring or by an RE2 pattern - determinism is byte equality") {
  CHECK(check_expected(" 42\n", {{"answer", "42"}}).ok);
  CHECK(check_expected("41", {{"answer", "42"}}).reason == "the answer differs from the expected one");
  CHECK(check_expected("The capital is Paris.", {{"contains", "Paris"}}).ok);
  CHECK_FALSE(check_expected("The capital is Lyon.", {{"contains", "Paris"}}).ok);
  CHECK(check_expected("The answer is 42.", {{"regex", "\\b4[0-9]\\b"}}).ok);
  CHECK(check_expected("The answer is 420.", {{"regex", "\\b4[0-9]\\b"}}).reason ==
        "the answer does not match the expected pattern");
  CHECK(check_expected("x", {{"regex", "(unclosed"}}).reason.rfind("the pattern does not compile", 0) == 0);
  CHECK(check_expected("x", {{"other", "x"}}).reason == "expect must be an object with answer, contains or regex");
  CHECK_FALSE(check_expected("x", "x").ok);
  CHECK(same_answer("a b", "a b"));
  CHECK_FALSE(same_answer("a b", "a  b"));
}

TEST_CASE("quality: a catastrophic pattern runs in linear time on a long answer (RE2 never backtracks)") {
  // (a+)+$ against "aaaa...ab" takes exponential time in a backtracking matcher; RE2 answers at once.
  const std::string answer = std::string(100'000, 'a') + "b";
  CHECK_FALSE(check_expected(answer, {{"regex", "(a+)+$"}}).ok);
  CHECK(check_expected(answer, {{"regex", "(a+)+b$"}}).ok);
}

TEST_CASE("quality: expect objects are checked at upload - a pattern that does not compile is named") {
  CHECK_FALSE(expect_problem({{"answer", "42"}}).has_value());
  CHECK_FALSE(expect_problem({{"regex", "^4[0-9]$"}}).has_value());
  CHECK(expect_problem("42").value() == "must be an object with answer, contains or regex");
  CHECK(expect_problem(json::object()).value() == "must give answer, contains or regex");
  CHECK(expect_problem({{"answer", 42}}).value() == "answer must be a string");
  CHECK(expect_problem({{"regex", "a{2,1}"}}).value().rfind("regex: the pattern does not compile", 0) == 0);
  CHECK(expect_problem({{"regex", std::string(5000, 'a')}}).value() ==
        "regex: the pattern is longer than 4096 characters");
}

TEST_CASE("quality: answers are checked against a JSON Schema - regular-expression keywords are left out") {
  const json schema = {{"type", "object"},
                       {"required", {"city", "population"}},
                       {"properties",
                        {{"city", {{"type", "string"}, {"pattern", "^(a+)+$"}}},
                         {"population", {{"type", "integer"}, {"minimum", 0}}},
                         {"pattern", {{"type", "string"}}}}}};  // a property named like the keyword
  CHECK(check_schema({{"city", "Paris"}, {"population", 2100000}}, schema).ok);
  const auto missing = check_schema({{"city", "Paris"}}, schema);
  CHECK_FALSE(missing.ok);
  CHECK(missing.reason.rfind("not valid against the schema", 0) == 0);
  CHECK_FALSE(check_schema({{"city", "Paris"}, {"population", -1}}, schema).ok);
  CHECK_FALSE(check_schema({{"city", "Paris"}, {"population", 1}, {"pattern", 5}}, schema).ok);
  // The pattern keyword is gone; the property named "pattern" stays.
  const json stripped = without_regex_keywords(schema);
  CHECK_FALSE(stripped["properties"]["city"].contains("pattern"));
  CHECK(stripped["properties"].contains("pattern"));
  CHECK(check_schema({{"city", std::string(50'000, 'a') + "!"}, {"population", 1}}, schema).ok);
  const auto remote = check_schema({{"a", 1}}, {{"$ref", "http://example.invalid/schema.json"}});
  CHECK_FALSE(remote.ok);
  CHECK(remote.reason.rfind("the schema cannot be used", 0) == 0);
}

TEST_CASE("quality: tool-call arguments are checked against the tool's parameters schema") {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}},
                     "additionalProperties": false}}}])");
  CHECK(check_tool_calls({{"get_weather", R"({"city": "Oslo"})"}}, tools).ok);
  const auto extra = check_tool_calls({{"get_weather", R"({"city": "Oslo", "units": "C"})"}}, tools);
  CHECK_FALSE(extra.ok);
  CHECK(extra.reason.rfind("call 0's arguments are not valid against the schema", 0) == 0);
  CHECK_FALSE(check_tool_calls({{"get_weather", R"({})"}}, tools).ok);
  CHECK(check_tool_calls({{"get_weather", R"({"city": "Oslo"})"}}, tools, "none").reason ==
        "tool_choice was none, yet a tool was called");
}

TEST_CASE("quality: answers nested deeper than the limit are refused before parsing") {
  const std::string deep = std::string(10'000, '[') + std::string(10'000, ']');
  CHECK(json_nesting_exceeds(deep));
  CHECK_FALSE(json_nesting_exceeds(R"({"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["})"));
  CHECK(check_json_answer("{\"a\": " + deep + "}").reason == "the answer nests deeper than 64 levels");
  CHECK_FALSE(answer_json(deep).has_value());
  CHECK_FALSE(check_tool_calls({{"f", deep}}, json::parse(R"([{"function": {"name": "f"}}])")).ok);
}

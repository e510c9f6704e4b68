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

TEST_CASE("quality: expected answers match exactly or by substring, and determinism is byte equality") {
  CHECK(check_expected(" 42\n", {{"answer", "42"}}).ok);
  CHECK(check_expected("41", {{"answer", "42"}}).reason == "the answer differs from the expected one");
  CHECK(check_expected("The capital is Paris.", {{"contains", "Paris"}}).ok);
  CHECK_FALSE(check_expected("The capital is Lyon.", {{"contains", "Paris"}}).ok);
  CHECK(check_expected("x", {{"regex", "x"}}).reason == "expect must be an object with answer or contains");
  CHECK_FALSE(check_expected("x", "x").ok);
  CHECK(same_answer("a b", "a b"));
  CHECK_FALSE(same_answer("a b", "a  b"));
}

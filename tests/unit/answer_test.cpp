// Quality requests and answers read back: the request body for a dataset item, streamed
// content and tool-call deltas reassembled, error and malformed events, the judge's score.
#include "llm/answer.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;
using namespace capsweep::llm;
using json = nlohmann::json;

namespace {

std::string delta(const json& d, const json& finish = nullptr) {
  return json{{"choices", {{{"index", 0}, {"delta", d}, {"finish_reason", finish}}}}}.dump();
}

}  // namespace

TEST_CASE("answer: streamed content, tool-call deltas, finish_reason and usage are reassembled") {
  const std::vector<std::string> events{
      delta({{"role", "assistant"}, {"content", ""}}),
      delta({{"content", "{\"a\":"}}),
      delta({{"content", " 1}"}}),
      delta({{"tool_calls", {{{"index", 0}, {"id", "c1"}, {"function", {{"name", "get_"}, {"arguments", "{\"ci"}}}}}}}),
      delta({{"tool_calls", {{{"index", 0}, {"function", {{"name", "weather"}, {"arguments", "ty\": \"Oslo\"}"}}}}}}}),
      delta({{"tool_calls", {{{"index", 1}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}}, "tool_calls"),
      json{{"choices", json::array()}, {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 12}}}}.dump(),
      "[DONE]"};
  const Answer a = assemble_answer(events);
  CHECK(a.text == "{\"a\": 1}");
  REQUIRE(a.tool_calls.size() == 2);
  CHECK(a.tool_calls[0].name == "get_weather");
  CHECK(a.tool_calls[0].arguments == "{\"city\": \"Oslo\"}");
  CHECK(a.tool_calls[1].name == "f");
  CHECK(a.finish_reason == "tool_calls");
  CHECK(a.completion_tokens == 12u);
  CHECK(a.prompt_tokens == 7u);
  CHECK(a.error.empty());
  CHECK_FALSE(a.malformed);
}

TEST_CASE("answer: a whole (non-streamed) chat answer and completions text read the same way") {
  const json whole{
      {"choices",
       {{{"message",
          {{"content", nullptr}, {"tool_calls", {{{"function", {{"name", "f"}, {"arguments", "{\"x\": 1}"}}}}}}}},
         {"finish_reason", "tool_calls"}}}},
      {"usage", {{"completion_tokens", 5}}}};
  const Answer a = assemble_answer({whole.dump()});
  REQUIRE(a.tool_calls.size() == 1);
  CHECK(a.tool_calls[0].arguments == "{\"x\": 1}");
  CHECK(a.text.empty());
  const Answer c = assemble_answer({json{{"choices", {{{"text", "42"}, {"finish_reason", "stop"}}}}}.dump()});
  CHECK(c.text == "42");
  CHECK(c.finish_reason == "stop");
}

TEST_CASE("answer: error events and malformed or too deep payloads are flagged, never thrown") {
  const Answer e = assemble_answer({delta({{"content", "x"}}), R"({"error": {"message": "overloaded\u0007"}})"});
  CHECK(e.error == "overloaded?");
  CHECK(assemble_answer({R"({"object": "error", "message": "bad"})"}).error == "bad");
  CHECK(assemble_answer({"not json"}).malformed);
  CHECK(assemble_answer({std::string(100'000, '[')}).malformed);
  CHECK(assemble_answer({"[1, 2]"}).malformed);
  const Answer empty = assemble_answer({});
  CHECK(empty.text.empty());
  CHECK(empty.finish_reason.empty());
}

TEST_CASE("answer: the quality body asks at temperature 0 with the item's fields and never ignore_eos") {
  Target t;
  t.api = Api::chat;
  t.model = "m";
  t.ignore_eos = true;
  t.extra_body = {{"top_k", 5}};
  DatasetEntry e;
  e.prompt = "hi";
  e.quality = json{{"response_format", {{"type", "json_object"}}},
                   {"tools", json::array({{{"type", "function"}}})},
                   {"tool_choice", "required"},
                   {"expect", {{"answer", "x"}}}}
                  .dump();
  const json b = json::parse(quality_body(t, e, 128, 7));
  CHECK(b["temperature"] == 0);
  CHECK(b["seed"] == 7);
  CHECK(b["max_completion_tokens"] == 128);
  CHECK(b["messages"][0]["content"] == "hi");
  CHECK(b["response_format"]["type"] == "json_object");
  CHECK(b["tool_choice"] == "required");
  CHECK(b["tools"].size() == 1);
  CHECK_FALSE(b.contains("expect"));
  CHECK_FALSE(b.contains("ignore_eos"));
  CHECK(b["top_k"] == 5);
  CHECK(b["stream"] == true);
  CHECK(b["stream_options"]["include_usage"] == true);
  e.max_tokens = 9;
  e.messages = R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])";
  CHECK(json::parse(quality_body(t, e, 128, 7))["max_completion_tokens"] == 9);
  CHECK(json::parse(quality_body(t, e, 128, 7))["messages"].size() == 2);
  t.api = Api::completions;
  const json c = json::parse(quality_body(t, e, 128, 7));
  CHECK(c["prompt"] == "hi");
  CHECK(c["max_tokens"] == 9);
}

TEST_CASE("answer: the judge's score is the first whole number, within the scale") {
  CHECK(judge_score("8", 10) == 8.0);
  CHECK(judge_score("Score: 7/10. Good answer.", 10) == 7.0);
  CHECK_FALSE(judge_score("11", 10).has_value());
  CHECK_FALSE(judge_score("0", 10).has_value());
  CHECK_FALSE(judge_score("no score", 10).has_value());
  CHECK_FALSE(judge_score("99999999999999999999", 100).has_value());
  CHECK(judge_score("100", 100) == 100.0);
  const json b = json::parse(judge_body(Target{}, "rate it"));
  CHECK(b["max_tokens"] == 16);
  CHECK(b["prompt"] == "rate it");
}

TEST_CASE("answer: a Responses API stream and a whole response read as a chat answer does") {
  const Answer s = assemble_answer(
      {R"({"type":"response.created","response":{"id":"resp_1","status":"in_progress","error":null,"output":[]}})",
       R"({"type":"response.output_text.delta","output_index":0,"delta":"for"})",
       R"({"type":"response.output_text.delta","output_index":0,"delta":"ty-two"})",
       R"({"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","name":"f"}})",
       R"({"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"x\":"})",
       R"({"type":"response.function_call_arguments.delta","output_index":1,"delta":" 1}"})",
       R"({"type":"response.incomplete","response":{"status":"incomplete","error":null,)"
       R"("output":[{"type":"message","content":[{"type":"output_text","text":"forty-two"}]}],)"
       R"("usage":{"input_tokens":9,"output_tokens":6}}})"});
  CHECK(s.error.empty());
  CHECK(s.text == "forty-two");  // from the deltas, not again from the terminal event's output
  REQUIRE(s.tool_calls.size() == 1);
  CHECK(s.tool_calls[0].name == "f");
  CHECK(s.tool_calls[0].arguments == "{\"x\": 1}");
  CHECK(s.finish_reason == "length");
  CHECK(s.completion_tokens == 6u);
  CHECK(s.prompt_tokens == 9u);
  const Answer whole = assemble_answer(
      {R"({"id":"resp_2","object":"response","status":"completed","error":null,"output":[)"
       R"({"type":"reasoning","content":[{"type":"reasoning_text","text":"hmm"}]},)"
       R"({"type":"message","content":[{"type":"output_text","text":"a "},{"type":"output_text","text":"b"}]}],)"
       R"("usage":{"input_tokens":3,"output_tokens":4}})"});
  CHECK(whole.error.empty());
  CHECK(whole.text == "a b");
  CHECK(whole.finish_reason == "stop");
  CHECK(whole.completion_tokens == 4u);
  CHECK(assemble_answer({R"({"type":"error","code":"x","message":"engine died"})"}).error == "engine died");
  CHECK(assemble_answer({R"({"type":"response.failed","response":{"error":{"message":"oom"}}})"}).error == "oom");
  // vLLM's error object has a top-level "type" too: still an error.
  CHECK(assemble_answer({R"({"object":"error","message":"bad","type":"BadRequestError","code":400})"}).error == "bad");
  // Odd member types are ignored, never thrown.
  CHECK(assemble_answer({R"({"object": 5, "type": 7})"}).error.empty());
}

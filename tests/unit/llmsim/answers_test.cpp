// capsweep-llmsim's structured answers: schema instances, arithmetic, and faults that are a
// property of the prompt (the same answer every time) unless the request is sampled.
#include "llmsim/answers.hpp"

#include <catch2/catch.hpp>

#include "core/quality.hpp"

using namespace capsweep;
using namespace capsweep::llmsim;
using json = nlohmann::json;

namespace {

CompletionRequest chat_request(const std::string& body) {
  ApiError error;
  auto r = parse_completion_request(body, Api::chat, "m", 0, error);
  REQUIRE(r.has_value());
  return *r;
}

std::string text_of(const CompletionRequest& r) {
  std::string out;
  for (const auto& p : r.script.pieces) out += p;
  return out;
}

}  // namespace

TEST_CASE("llmsim answers: a schema instance is valid against its schema") {
  const json schema = json::parse(R"({"type": "object", "required": ["city", "n", "tags", "ok"],
      "properties": {"city": {"type": "string", "minLength": 3}, "n": {"type": "integer", "minimum": 5, "maximum": 7},
                     "tags": {"type": "array", "minItems": 2, "items": {"enum": ["a", "b"]}}, "ok": {"type": "boolean"},
                     "kind": {"const": "x"}, "ratio": {"type": "number", "maximum": 0.5}}})");
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const json v = instance_of(schema, seed);
    INFO(v.dump());
    CHECK(check_schema(v, schema).ok);
  }
}

TEST_CASE("llmsim answers: arithmetic questions are answered, other text is not") {
  CHECK(arithmetic_answer("What is 12 + 30? Answer with the number only.") == 42);
  CHECK(arithmetic_answer("What is 7 * 6?") == 42);
  CHECK(arithmetic_answer("What is 50 - 8?") == 42);
  CHECK(arithmetic_answer("item 12 of 30") == std::nullopt);
  CHECK(arithmetic_answer("") == std::nullopt);
  CHECK(token_pieces("abcdefghij") == std::vector<std::string>{"abcd", "efgh", "ij"});
}

TEST_CASE("llmsim answers: json_object, tools and arithmetic get scripted answers - plain prompts the word stream") {
  SimConfig cfg;
  Rng rng(1);
  auto r = chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0,
                           "response_format": {"type": "json_object"}})");
  script_answer(r, cfg, rng);
  CHECK(check_json_answer(text_of(r)).ok);
  auto t = chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required",
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": ["a"],
                 "properties": {"a": {"type": "integer"}}}}}]})");
  script_answer(t, cfg, rng);
  CHECK(t.script.tool_call);
  CHECK(t.script.tool_name == "f");
  CHECK(t.script.finish_reason == "tool_calls");
  CHECK(json::parse(text_of(t))["a"].is_number_integer());
  auto q = chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "What is 2 + 3?"}]})");
  script_answer(q, cfg, rng);
  CHECK(text_of(q) == "5");
  auto plain = chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "hello"}]})");
  script_answer(plain, cfg, rng);
  CHECK(plain.script.pieces.empty());
}

TEST_CASE("llmsim answers: a fault strikes the same prompts every time at temperature 0, at about its rate") {
  SimConfig cfg;
  cfg.json_corrupt_rate = 0.1;
  int broken = 0, changed = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::string body = json{{"model", "m"},
                                  {"temperature", 0},
                                  {"messages", {{{"role", "user"}, {"content", "item " + std::to_string(i)}}}},
                                  {"response_format", {{"type", "json_object"}}}}
                                 .dump();
    Rng rng1(1), rng2(2);
    auto a = chat_request(body), b = chat_request(body);
    script_answer(a, cfg, rng1);
    script_answer(b, cfg, rng2);
    broken += !check_json_answer(text_of(a)).ok;
    changed += text_of(a) != text_of(b);
  }
  CHECK(broken > 70);
  CHECK(broken < 130);
  CHECK(changed == 0);
  // The nondeterminism fault varies the answer from one asking to the next.
  SimConfig nd;
  nd.nondeterminism_rate = 1;
  const std::string body = R"({"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "q"}],
                               "response_format": {"type": "json_object"}})";
  Rng r1(1), r2(2);
  auto a = chat_request(body), b = chat_request(body);
  script_answer(a, nd, r1);
  script_answer(b, nd, r2);
  CHECK(text_of(a) != text_of(b));
}

TEST_CASE("llmsim answers: the overrun and wrong-answer faults, and bad fields named") {
  SimConfig cfg;
  cfg.overrun_max_tokens_rate = 1;
  cfg.wrong_answer_rate = 1;
  Rng rng(3);
  auto q = chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "What is 2 + 3?"}]})");
  script_answer(q, cfg, rng);
  CHECK(text_of(q) == "6");
  CHECK(q.reported_tokens_extra >= 1);
  ApiError error;
  CHECK_FALSE(
      parse_completion_request(R"({"model": "m", "prompt": "x", "tools": []})", Api::completions, "m", 0, error));
  CHECK(error.param == "tools");
  CHECK_FALSE(
      parse_completion_request(R"({"model": "m", "prompt": "x", "temperature": 3})", Api::completions, "m", 0, error));
  CHECK(error.param == "temperature");
  CHECK_FALSE(parse_completion_request(R"({"model": "m", "prompt": "x", "response_format": "json"})", Api::completions,
                                       "m", 0, error));
  CHECK(error.param == "response_format");
}

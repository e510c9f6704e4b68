#include "llm/openai_stream.hpp"

#include <catch2/catch.hpp>

using namespace capsweep::llm;
using Kind = StreamChunk::Kind;

TEST_CASE("openai stream: completion chunks with text are content") {
  auto c = interpret_chunk(
      R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hello","logprobs":null,"finish_reason":null,"stop_reason":null}]})");
  CHECK(c.kind == Kind::content);
  CHECK_FALSE(c.finished);
  CHECK_FALSE(c.completion_tokens.has_value());
}

TEST_CASE("openai stream: continuous usage and finish reason are read") {
  auto c = interpret_chunk(
      R"({"choices":[{"index":0,"text":" a b","finish_reason":"length"}],"usage":{"prompt_tokens":12,"total_tokens":20,"completion_tokens":8}})");
  CHECK(c.kind == Kind::content);
  CHECK(c.finished);
  CHECK(c.completion_tokens == 8u);
  CHECK(c.prompt_tokens == 12u);
}

TEST_CASE("openai stream: chat deltas, role-only and reasoning chunks") {
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]})")
            .kind == Kind::role_only);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant"}}]})").kind == Kind::role_only);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})").kind == Kind::content);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"reasoning_content":"think"}}]})").kind == Kind::content);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"content":"\"quoted\\n\u00e9"}}]})").kind == Kind::content);
}

TEST_CASE("openai stream: empty text and usage-only chunks are not tokens") {
  auto fin = interpret_chunk(R"({"choices":[{"index":0,"text":"","finish_reason":"stop"}]})");
  CHECK(fin.kind == Kind::empty);
  CHECK(fin.finished);
  auto usage =
      interpret_chunk(R"({"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}})");
  CHECK(usage.kind == Kind::usage_only);
  CHECK(usage.completion_tokens == 5u);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"text":"x"}],"usage":null})").kind == Kind::content);
}

TEST_CASE("openai stream: [DONE] and errors") {
  CHECK(interpret_chunk("[DONE]").kind == Kind::done);
  CHECK(interpret_chunk(" [DONE] ").kind == Kind::done);
  auto e = interpret_chunk(R"({"error":{"message":"CUDA out of memory","type":"InternalServerError","code":500}})");
  CHECK(e.kind == Kind::error);
  CHECK(e.error_message == "CUDA out of memory");
  auto v = interpret_chunk(R"({"object":"error","message":"boom","type":"BadRequestError","code":400})");
  CHECK(v.kind == Kind::error);
  CHECK(v.error_message == "boom");
  CHECK(interpret_chunk(R"({"error":null,"choices":[{"index":0,"text":"x"}]})").kind == Kind::content);
  // Text that merely mentions keys does not confuse the scanner.
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"text":"{\"error\": 1, \"usage\": 2}"}]})").kind == Kind::content);
}

TEST_CASE("openai stream: only the first choice counts") {
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"text":""},{"index":1,"text":"other"}]})").kind == Kind::empty);
}

TEST_CASE("openai stream: malformed payloads are reported, never crash") {
  for (const char* bad : {"", "{", "[1,2]", "{\"choices\":[{\"text\":\"x\"}]", "{\"a\":tru}", "{\"a\":\"\\q\"}",
                          "{\"a\":1}}", "nonsense", "{\"a\":\"unterminated}", "{\"a\" 1}", "{\"a\":-}"}) {
    INFO(bad);
    CHECK(interpret_chunk(bad).kind == Kind::malformed);
  }
  std::string deep(100, '[');
  CHECK(interpret_chunk("{\"a\":" + deep + "}").kind == Kind::malformed);
}

TEST_CASE("openai stream: reasoning deltas are tokens the user does not see, and usage reasoning tokens are read") {
  auto think = interpret_chunk(R"({"choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]})");
  CHECK(think.kind == Kind::content);
  CHECK(think.reasoning);
  auto think2 = interpret_chunk(R"({"choices":[{"index":0,"delta":{"reasoning":"so","content":null}}]})");
  CHECK(think2.kind == Kind::content);
  CHECK(think2.reasoning);
  auto visible = interpret_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})");
  CHECK(visible.kind == Kind::content);
  CHECK_FALSE(visible.reasoning);
  // Both in one delta: the user sees a token.
  auto both = interpret_chunk(R"({"choices":[{"index":0,"delta":{"reasoning_content":"x","content":"y"}}]})");
  CHECK_FALSE(both.reasoning);
  // Empty reasoning text is no token.
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"reasoning_content":""}}]})").kind == Kind::empty);
  auto usage = interpret_chunk(
      R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":30,"completion_tokens_details":{"reasoning_tokens":12}}})");
  CHECK(usage.kind == Kind::usage_only);
  CHECK(usage.completion_tokens == 30u);
  CHECK(usage.reasoning_tokens == 12u);
  // reasoning_tokens elsewhere is not usage's.
  auto elsewhere = interpret_chunk(R"({"choices":[],"usage":{"completion_tokens":3},"reasoning_tokens":9})");
  CHECK_FALSE(elsewhere.reasoning_tokens.has_value());
  auto null_details =
      interpret_chunk(R"({"choices":[],"usage":{"completion_tokens":3,"completion_tokens_details":null}})");
  CHECK(null_details.kind == Kind::usage_only);
  CHECK_FALSE(null_details.reasoning_tokens.has_value());
  // A malformed details object is a malformed chunk, as any other.
  CHECK(interpret_chunk(R"({"choices":[],"usage":{"completion_tokens_details":{"reasoning_tokens":}}})").kind ==
        Kind::malformed);
}

TEST_CASE("openai stream: tool calls, refusals and content parts are tokens, and malformed ones are not") {
  auto tool = interpret_chunk(
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]}}]})");
  CHECK(tool.kind == Kind::content);
  CHECK(tool.tool_call);
  CHECK_FALSE(tool.reasoning);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":""}}]}}]})")
            .kind == Kind::empty);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"refusal":"No."}}]})").kind == Kind::content);
  auto thinking =
      interpret_chunk(R"({"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":"hm"}]}}]})");
  CHECK(thinking.kind == Kind::content);
  CHECK(thinking.reasoning);
  auto text = interpret_chunk(R"({"choices":[{"index":0,"delta":{"content":[{"text":"4","type":"text"}]}}]})");
  CHECK(text.kind == Kind::content);
  CHECK_FALSE(text.reasoning);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"content":[{"type":"text","text":""}]}}]})").kind ==
        Kind::empty);
  // A part's signature is not thinking.
  CHECK(interpret_chunk(
            R"({"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":"","signature":"abc"}]}}]})")
            .kind == Kind::empty);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"x"}]}})").kind ==
        Kind::malformed);
  CHECK(interpret_chunk(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"x}}]}}]})").kind ==
        Kind::malformed);
}

TEST_CASE("openai stream: generated tokens by what the usage adds up to") {
  UsageCounts inside{10, 8, 6, 18};  // reasoning inside completion_tokens: total = prompt + completion
  CHECK(generated_tokens(inside) == 8u);
  UsageCounts apart{10, 2, 6, 18};  // counted apart: total = prompt + completion + reasoning
  CHECK(generated_tokens(apart) == 8u);
  UsageCounts no_total{10, 2, 6, std::nullopt};  // more reasoning than completion: apart
  CHECK(generated_tokens(no_total) == 8u);
  UsageCounts plain{10, 5, std::nullopt, 15};
  CHECK(generated_tokens(plain) == 5u);
  CHECK_FALSE(generated_tokens(UsageCounts{10, std::nullopt, 3, 13}).has_value());
  CHECK(interpret_chunk(R"({"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":9}})")
            .total_tokens == 9u);
}

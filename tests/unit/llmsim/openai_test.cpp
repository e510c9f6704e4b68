#include "llmsim/openai.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/text.hpp"

using namespace capsweep::llmsim;
using capsweep::count_words;
using json = nlohmann::json;

namespace {
CompletionRequest parse_ok(const std::string& body, Api api = Api::completions) {
  ApiError err;
  auto r = parse_completion_request(body, api, "sim-8b", 1, err);
  INFO(err.message);
  REQUIRE(r.has_value());
  return *r;
}
ApiError parse_err(const std::string& body, Api api = Api::completions) {
  ApiError err;
  auto r = parse_completion_request(body, api, "sim-8b", 1, err);
  REQUIRE_FALSE(r.has_value());
  return err;
}
// Splits an SSE text into the JSON objects of its data events.
std::vector<json> events(const std::string& sse) {
  std::vector<json> out;
  std::size_t pos = 0;
  while ((pos = sse.find("data: ", pos)) != std::string::npos) {
    const auto end = sse.find("\n\n", pos);
    const auto payload = sse.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") out.push_back(json::parse(payload));
    pos = end;
  }
  return out;
}
}  // namespace

TEST_CASE("llmsim openai: prompt tokens are whitespace words") {
  CHECK(count_words("") == 0);
  CHECK(count_words("one") == 1);
  CHECK(count_words("  one two\tthree\nfour  ") == 4);
}

TEST_CASE("llmsim openai: completion requests parse with their options") {
  auto r = parse_ok(R"({"model": "sim-8b", "prompt": "a b c", "max_tokens": 64, "stream": true,
      "ignore_eos": true, "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  CHECK(r.prompt_tokens == 3);
  CHECK(r.max_tokens == 64);
  CHECK(r.stream);
  CHECK(r.ignore_eos);
  CHECK(r.include_usage);
  CHECK(r.continuous_usage);
  auto d = parse_ok(R"({"model": "sim-8b", "prompt": [1, 2, 3, 4]})");
  CHECK(d.prompt_tokens == 4);
  CHECK(d.max_tokens == 16);
  CHECK_FALSE(d.stream);
}

TEST_CASE("llmsim openai: chat requests count every message and honour max_completion_tokens") {
  auto r = parse_ok(R"({"model": "sim-8b", "messages": [{"role": "system", "content": "be brief"},
      {"role": "user", "content": [{"type": "text", "text": "three more words"}]}],
      "max_completion_tokens": 7, "max_tokens": 99})",
                    Api::chat);
  CHECK(r.prompt_tokens == 5);
  CHECK(r.max_tokens == 7);
}

TEST_CASE("llmsim openai: bad requests get OpenAI-style errors naming the parameter") {
  CHECK(parse_err("{not json").message.find("JSON") != std::string::npos);
  CHECK(parse_err("[1]").status == 400);
  CHECK(parse_err(R"({"prompt": "a"})").param == "model");
  auto wrong = parse_err(R"({"model": "gpt-x", "prompt": "a"})");
  CHECK(wrong.status == 404);
  CHECK(wrong.type == "NotFoundError");
  CHECK(parse_err(R"({"model": "sim-8b"})").param == "prompt");
  CHECK(parse_err(R"({"model": "sim-8b", "prompt": ""})").param == "prompt");
  CHECK(parse_err(R"({"model": "sim-8b", "prompt": 5})").param == "prompt");
  CHECK(parse_err(R"({"model": "sim-8b", "prompt": "a", "max_tokens": 0})").param == "max_tokens");
  CHECK(parse_err(R"({"model": "sim-8b", "prompt": "a", "max_tokens": -3})").param == "max_tokens");
  CHECK(parse_err(R"({"model": "sim-8b", "prompt": "a", "max_tokens": "8"})").param == "max_tokens");
  CHECK(parse_err(R"({"model": "sim-8b", "prompt": "a", "stream": "yes"})").param == "stream");
  CHECK(parse_err(R"({"model": "sim-8b", "prompt": "a", "stream_options": {"include_usage": 1}})").param ==
        "stream_options.include_usage");
  CHECK(parse_err(R"({"model": "sim-8b", "messages": []})", Api::chat).param == "messages");
  CHECK(parse_err(R"({"model": "sim-8b", "messages": [{"content": "x"}]})", Api::chat).param == "messages[0]");
  auto body = json::parse(error_body(parse_err(R"({"model": "sim-8b", "prompt": "a", "max_tokens": 0})")));
  CHECK(body.at("error").at("code") == 400);
  CHECK(body.at("error").at("param") == "max_tokens");
  CHECK(body.at("error").at("type") == "BadRequestError");
}

TEST_CASE("llmsim openai: generated text is deterministic per seed and prompt") {
  auto a = parse_ok(R"({"model": "sim-8b", "prompt": "same prompt"})");
  auto b = parse_ok(R"({"model": "sim-8b", "prompt": "same prompt"})");
  auto c = parse_ok(R"({"model": "sim-8b", "prompt": "same prompt", "seed": 9})");
  CHECK(a.text_seed == b.text_seed);
  CHECK(a.text_seed != c.text_seed);
  std::string ta, tc;
  for (std::uint32_t i = 0; i < 20; ++i) {
    ta += token_text(a.text_seed, i);
    tc += token_text(c.text_seed, i);
  }
  CHECK(ta != tc);
  CHECK(count_words(ta) == 20);  // one word per token
}

TEST_CASE("llmsim openai: SSE chunks carry text, continuous usage, finish reason and final usage") {
  auto r = parse_ok(R"({"model": "sim-8b", "prompt": "a b", "max_tokens": 3, "stream": true,
      "stream_options": {"include_usage": true, "continuous_usage_stats": true}})");
  ChunkFormatter f(r, "cmpl-7", 1700000000);
  std::string sse;
  f.append_tokens(sse, 0, 1, 1, false);
  f.append_tokens(sse, 1, 2, 3, true);
  f.append_end(sse, 3);
  CHECK(sse.substr(sse.size() - 14) == "data: [DONE]\n\n");
  auto ev = events(sse);
  REQUIRE(ev.size() == 3);
  CHECK(ev[0].at("id") == "cmpl-7");
  CHECK(ev[0].at("object") == "text_completion");
  CHECK(ev[0].at("choices")[0].at("text") == std::string(token_text(r.text_seed, 0)));
  CHECK(ev[0].at("choices")[0].at("finish_reason").is_null());
  CHECK(ev[0].at("usage").at("completion_tokens") == 1);
  CHECK(ev[1].at("choices")[0].at("text") ==
        std::string(token_text(r.text_seed, 1)) + std::string(token_text(r.text_seed, 2)));
  CHECK(ev[1].at("choices")[0].at("finish_reason") == "length");
  CHECK(ev[1].at("usage").at("total_tokens") == 5);
  CHECK(ev[2].at("choices").empty());
  CHECK(ev[2].at("usage").at("completion_tokens") == 3);
}

TEST_CASE("llmsim openai: chat chunks use deltas and a role-only first chunk") {
  auto r =
      parse_ok(R"({"model": "sim-8b", "messages": [{"role": "user", "content": "hi"}], "stream": true})", Api::chat);
  ChunkFormatter f(r, "chatcmpl-1", 1);
  std::string sse;
  f.append_role(sse);
  f.append_tokens(sse, 0, 1, 1, true);
  auto ev = events(sse);
  REQUIRE(ev.size() == 2);
  CHECK(ev[0].at("object") == "chat.completion.chunk");
  CHECK(ev[0].at("choices")[0].at("delta").at("role") == "assistant");
  CHECK(ev[0].at("choices")[0].at("delta").at("content") == "");
  CHECK(ev[1].at("choices")[0].at("delta").at("content") == std::string(token_text(r.text_seed, 0)));
  CHECK_FALSE(ev[1].contains("usage"));
  auto full = json::parse(f.full_response(4));
  CHECK(full.at("object") == "chat.completion");
  CHECK(full.at("usage").at("completion_tokens") == 4);
  CHECK(count_words(full.at("choices")[0].at("message").at("content").get<std::string>()) == 4);
}

TEST_CASE("llmsim openai: a reasoning model's first tokens are reasoning_content, counted in usage's details") {
  auto r = parse_ok(R"({"model": "sim-8b", "messages": [{"role": "user", "content": "hi"}], "stream": true,
      "stream_options": {"include_usage": true}})",
                    Api::chat);
  r.reasoning_tokens = 2;
  ChunkFormatter f(r, "chatcmpl-2", 1);
  std::string sse;
  f.append_tokens(sse, 0, 1, 1, false);
  f.append_tokens(sse, 1, 1, 2, false);
  f.append_tokens(sse, 2, 2, 4, true);
  f.append_end(sse, 4);
  auto ev = events(sse);
  REQUIRE(ev.size() == 4);
  CHECK(ev[0].at("choices")[0].at("delta").at("reasoning_content") == std::string(token_text(r.text_seed, 0)));
  CHECK_FALSE(ev[0].at("choices")[0].at("delta").contains("content"));
  CHECK(ev[1].at("choices")[0].at("delta").contains("reasoning_content"));
  CHECK(ev[2].at("choices")[0].at("delta").at("content") ==
        std::string(token_text(r.text_seed, 2)) + std::string(token_text(r.text_seed, 3)));
  CHECK(ev[3].at("usage").at("completion_tokens") == 4);
  CHECK(ev[3].at("usage").at("completion_tokens_details").at("reasoning_tokens") == 2);
  // Not streamed: the reasoning apart from the content, and the same usage.
  auto full = json::parse(f.full_response(5));
  const auto& message = full.at("choices")[0].at("message");
  CHECK(count_words(message.at("reasoning_content").get<std::string>()) == 2);
  CHECK(count_words(message.at("content").get<std::string>()) == 3);
  CHECK(full.at("usage").at("completion_tokens_details").at("reasoning_tokens") == 2);
  // Fewer tokens than the reasoning: all of them reasoning.
  CHECK(json::parse(f.full_response(1)).at("usage").at("completion_tokens_details").at("reasoning_tokens") == 1);
}

TEST_CASE("llmsim openai: a prompt's blocks are named by every word up to their end") {
  std::string a, b;
  for (int i = 0; i < 40; ++i) a += "w" + std::to_string(i) + " ";
  for (int i = 0; i < 40; ++i) b += (i == 20 ? std::string("x") : "w" + std::to_string(i)) + "  ";
  const auto ra = parse_ok(json{{"model", "sim-8b"}, {"prompt", a}}.dump());
  const auto rb = parse_ok(json{{"model", "sim-8b"}, {"prompt", b}}.dump());
  REQUIRE(ra.blocks.size() == 2);  // 40 words: two full blocks of 16, 8 words left over
  REQUIRE(rb.blocks.size() == 2);
  CHECK(ra.blocks[0] == rb.blocks[0]);  // the same first 16 words (white space does not count)
  CHECK(ra.blocks[1] != rb.blocks[1]);  // word 20 differs
  // Token ids are blocks too; a short prompt has none.
  std::vector<int> ids(33, 7);
  CHECK(parse_ok(json{{"model", "sim-8b"}, {"prompt", ids}}.dump()).blocks.size() == 2);
  CHECK(parse_ok(json{{"model", "sim-8b"}, {"prompt", "a few words"}}.dump()).blocks.empty());
}

TEST_CASE("llmsim openai: chat blocks run over every message, and the roles count in their names") {
  std::string words;
  for (int i = 0; i < 16; ++i) words += "w" + std::to_string(i) + " ";
  auto chat = [&](const char* role) {
    return json{
        {"model", "sim-8b"},
        {"messages", json::array({{{"role", role}, {"content", words}}, {{"role", "user"}, {"content", words}}})}}
        .dump();
  };
  const auto sys = parse_ok(chat("system"), Api::chat);
  const auto usr = parse_ok(chat("user"), Api::chat);
  REQUIRE(sys.blocks.size() == 2);
  CHECK(sys.blocks[0] != usr.blocks[0]);
  CHECK(sys.blocks == parse_ok(chat("system"), Api::chat).blocks);
}

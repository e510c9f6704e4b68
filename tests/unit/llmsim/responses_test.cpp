// capsweep-llmsim's Responses API: the request's input and max_output_tokens (values and
// errors), its named events and the whole response, with the usage a client reads.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "llmsim/openai.hpp"

using namespace capsweep::llmsim;
using capsweep::count_words;
using json = nlohmann::json;

namespace {

CompletionRequest parse_ok(const std::string& body) {
  ApiError err;
  auto r = parse_completion_request(body, Api::responses, "sim-8b", 1, err);
  INFO(err.message);
  REQUIRE(r.has_value());
  return *r;
}

ApiError parse_err(const std::string& body) {
  ApiError err;
  REQUIRE_FALSE(parse_completion_request(body, Api::responses, "sim-8b", 1, err).has_value());
  return err;
}

// The (event name, data) pairs of an SSE text.
std::vector<std::pair<std::string, json>> named_events(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  std::size_t pos = 0;
  while ((pos = sse.find("event: ", pos)) != std::string::npos) {
    const auto line_end = sse.find('\n', pos);
    const auto data = sse.find("data: ", line_end);
    const auto end = sse.find("\n\n", data);
    out.emplace_back(sse.substr(pos + 7, line_end - pos - 7), json::parse(sse.substr(data + 6, end - data - 6)));
    pos = end;
  }
  return out;
}

}  // namespace

TEST_CASE("llmsim responses: input as text or messages, max_output_tokens and its default") {
  auto text = parse_ok(R"({"model": "sim-8b", "input": "one two three", "max_output_tokens": 7, "stream": true})");
  CHECK(text.api == Api::responses);
  CHECK(text.prompt_tokens == 3);
  CHECK(text.max_tokens == 7);
  CHECK(text.stream);
  auto turns = parse_ok(R"({"model": "sim-8b", "input": [{"role": "user", "content": "a b"},
      {"role": "assistant", "content": "c"}, {"type": "message", "role": "user",
      "content": [{"type": "input_text", "text": "d e f"}]}]})");
  CHECK(turns.prompt_tokens == 6);
  CHECK(turns.max_tokens == 256);
  CHECK_FALSE(turns.stream);
  // max_tokens is chat's name, not this API's: the default stands.
  CHECK(parse_ok(R"({"model": "sim-8b", "input": "x", "max_tokens": 3})").max_tokens == 256);
}

TEST_CASE("llmsim responses: bad requests name the field") {
  CHECK(parse_err(R"({"model": "sim-8b"})").param == "input");
  CHECK(parse_err(R"({"model": "sim-8b", "input": ""})").param == "input");
  CHECK(parse_err(R"({"model": "sim-8b", "input": []})").param == "input");
  CHECK(parse_err(R"({"model": "sim-8b", "input": [{"content": "x"}]})").param == "input[0]");
  CHECK(parse_err(R"({"model": "sim-8b", "input": "x", "max_output_tokens": 0})").param == "max_output_tokens");
  CHECK(parse_err(R"({"model": "sim-8b", "input": "x", "stream": "yes"})").param == "stream");
  CHECK(parse_err(R"({"model": "other", "input": "x"})").status == 404);
}

TEST_CASE("llmsim responses: created, text deltas, then completed or incomplete with usage, and no [DONE]") {
  auto r = parse_ok(R"({"model": "sim-8b", "input": "a b", "max_output_tokens": 3, "stream": true})");
  ChunkFormatter f(r, "resp-4", 1700000000);
  std::string sse;
  f.append_role(sse);
  f.append_tokens(sse, 0, 1, 1, false);
  f.append_tokens(sse, 1, 2, 3, true);
  f.append_end(sse, 3);
  CHECK(sse.find("[DONE]") == std::string::npos);
  const auto ev = named_events(sse);
  REQUIRE(ev.size() == 4);
  CHECK(ev[0].first == "response.created");
  CHECK(ev[0].second.at("response").at("id") == "resp-4");
  CHECK(ev[1].first == "response.output_text.delta");
  CHECK(ev[1].second.at("type") == ev[1].first);
  CHECK(ev[1].second.at("delta") == std::string(token_text(r.text_seed, 0)));
  CHECK(ev[2].second.at("delta") == std::string(token_text(r.text_seed, 1)) + std::string(token_text(r.text_seed, 2)));
  CHECK(ev[2].second.at("sequence_number") > ev[1].second.at("sequence_number"));
  // The word stream ran into max_output_tokens: incomplete, as OpenAI says it.
  CHECK(ev[3].first == "response.incomplete");
  const json& resp = ev[3].second.at("response");
  CHECK(resp.at("incomplete_details").at("reason") == "max_output_tokens");
  CHECK(resp.at("usage").at("input_tokens") == 2);
  CHECK(resp.at("usage").at("output_tokens") == 3);
  CHECK(resp.at("usage").at("total_tokens") == 5);
  CHECK(count_words(resp.at("output")[0].at("content")[0].at("text").get<std::string>()) == 3);
}

TEST_CASE("llmsim responses: a reasoning model's first tokens are reasoning deltas, counted in the usage") {
  auto r = parse_ok(R"({"model": "sim-8b", "input": "hi", "stream": true})");
  r.reasoning_tokens = 2;
  ChunkFormatter f(r, "resp-5", 1);
  std::string sse;
  f.append_tokens(sse, 0, 2, 2, false);
  f.append_tokens(sse, 2, 1, 3, true);
  f.append_end(sse, 3);
  const auto ev = named_events(sse);
  REQUIRE(ev.size() == 3);
  CHECK(ev[0].first == "response.reasoning_text.delta");
  CHECK(ev[1].first == "response.output_text.delta");
  CHECK(ev[1].second.at("output_index") == 1);
  const json& usage = ev[2].second.at("response").at("usage");
  CHECK(usage.at("output_tokens") == 3);
  CHECK(usage.at("output_tokens_details").at("reasoning_tokens") == 2);
  // Not streamed: the same response object, its reasoning item first.
  const auto full = json::parse(f.full_response(3));
  CHECK(full.at("object") == "response");
  CHECK(full.at("output")[0].at("type") == "reasoning");
  CHECK(count_words(full.at("output")[1].at("content")[0].at("text").get<std::string>()) == 1);
  CHECK(full.at("usage").at("output_tokens") == 3);
}

TEST_CASE("llmsim responses: store and previous_response_id, values and errors") {
  const auto plain = parse_ok(R"({"model": "sim-8b", "input": "x"})");
  CHECK(plain.store);  // kept unless asked not to, as OpenAI's
  CHECK(plain.previous_response_id.empty());
  const auto next = parse_ok(R"({"model": "sim-8b", "input": "x", "store": false, "previous_response_id": "resp-3"})");
  CHECK_FALSE(next.store);
  CHECK(next.previous_response_id == "resp-3");
  CHECK(parse_err(R"({"model": "sim-8b", "input": "x", "store": "yes"})").param == "store");
  CHECK(parse_err(R"({"model": "sim-8b", "input": "x", "previous_response_id": ""})").param == "previous_response_id");
  CHECK(parse_err(R"({"model": "sim-8b", "input": "x", "previous_response_id": 7})").param == "previous_response_id");
}

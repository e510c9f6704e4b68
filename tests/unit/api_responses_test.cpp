// The Responses API's row of the target-API table: its request body, its stream's events
// (values and errors) and a whole answer's usage.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "llm/api_table.hpp"
#include "llm/target.hpp"

using namespace capsweep::llm;
using Kind = StreamChunk::Kind;
using json = nlohmann::json;

namespace {

StreamChunk read(std::string_view data) {
  return api_row(Api::responses).read_chunk(data);
}

Target responses_target(bool stream) {
  auto t = parse_target(
      json{{"base_url", "http://127.0.0.1:8000"}, {"api", "responses"}, {"model", "m"}, {"stream", stream}});
  REQUIRE(t.has_value());
  return *t;
}

}  // namespace

TEST_CASE("responses API: the row is named, has its path and takes messages") {
  REQUIRE(parse_api("responses") == Api::responses);
  CHECK(to_string(Api::responses) == "responses");
  CHECK(api_row(Api::responses).path == "/v1/responses");
  CHECK(api_row(Api::responses).messages);
  CHECK_FALSE(api_row(Api::responses).quality);
  CHECK(responses_target(true).completion_path() == "/v1/responses");
}

TEST_CASE("responses API: a request sends input and max_output_tokens, no stream_options") {
  const auto body = json::parse(completion_body(responses_target(true), "a b c", 32));
  CHECK(body.at("input") == "a b c");
  CHECK(body.at("max_output_tokens") == 32);
  CHECK(body.at("stream") == true);
  CHECK(body.at("store") == false);
  CHECK_FALSE(body.contains("stream_options"));
  CHECK_FALSE(body.contains("prompt"));
  CHECK_FALSE(body.contains("max_tokens"));
  const auto turns = json::parse(completion_body(
      responses_target(false), {}, 8, R"([{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}])"));
  REQUIRE(turns.at("input").is_array());
  CHECK(turns.at("input").size() == 2);
  CHECK(turns.at("input")[1].at("role") == "assistant");
  CHECK(turns.at("stream") == false);
}

TEST_CASE("responses API: extra_body may keep answers (store) but not set the input") {
  auto kept = parse_target(json{
      {"base_url", "http://127.0.0.1:8000"}, {"api", "responses"}, {"model", "m"}, {"extra_body", {{"store", true}}}});
  REQUIRE(kept.has_value());
  CHECK(json::parse(completion_body(*kept, "x", 4)).at("store") == true);
  for (const char* field : {"input", "max_output_tokens", "previous_response_id"}) {
    auto bad = parse_target(json{
        {"base_url", "http://127.0.0.1:8000"}, {"api", "responses"}, {"model", "m"}, {"extra_body", {{field, 1}}}});
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().field == std::string("/target/extra_body/") + field);
  }
}

TEST_CASE("responses API: text, refusal and call-argument deltas are visible tokens, reasoning deltas hidden ones") {
  auto text = read(R"({"type":"response.output_text.delta","sequence_number":3,"item_id":"msg_1",)"
                   R"("output_index":0,"content_index":0,"delta":" hello"})");
  CHECK(text.kind == Kind::content);
  CHECK_FALSE(text.reasoning);
  CHECK_FALSE(text.finished);
  auto thought = read(R"({"type":"response.reasoning_text.delta","item_id":"rs_1","delta":"hmm"})");
  CHECK(thought.kind == Kind::content);
  CHECK(thought.reasoning);
  CHECK(read(R"({"type":"response.reasoning_summary_text.delta","delta":"so"})").reasoning);
  auto call = read(R"({"type":"response.function_call_arguments.delta","delta":"{\"a\":"})");
  CHECK(call.kind == Kind::content);
  CHECK(call.tool_call);
  CHECK_FALSE(call.reasoning);
  CHECK(read(R"({"type":"response.refusal.delta","delta":"no"})").kind == Kind::content);
  // An empty delta and the events around the text are not tokens.
  CHECK(read(R"({"type":"response.output_text.delta","delta":""})").kind == Kind::empty);
  for (const char* other : {R"({"type":"response.created","response":{"id":"resp_1","output":[],"usage":null}})",
                            R"({"type":"response.in_progress","response":{"id":"resp_1"}})",
                            R"({"type":"response.output_item.added","item":{"type":"message","content":[]}})",
                            R"({"type":"response.output_text.done","text":"hello world"})"}) {
    CHECK(read(other).kind == Kind::empty);
    CHECK_FALSE(read(other).finished);
  }
}

TEST_CASE("responses API: completed and incomplete end the answer with its usage") {
  auto done = read(R"({"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","status":"completed",)"
                   R"("output":[{"type":"message","content":[{"type":"output_text","text":"a \"b\" c"}]}],)"
                   R"("usage":{"input_tokens":12,"output_tokens":7,"output_tokens_details":{"reasoning_tokens":3},)"
                   R"("total_tokens":19}}})");
  CHECK(done.kind == Kind::empty);
  CHECK(done.finished);
  CHECK(done.prompt_tokens == 12u);
  CHECK(done.completion_tokens == 7u);
  CHECK(done.reasoning_tokens == 3u);
  CHECK(done.total_tokens == 19u);
  CHECK(generated_tokens({done.prompt_tokens, done.completion_tokens, done.reasoning_tokens, done.total_tokens}) == 7u);
  auto cut =
      read(R"({"type":"response.incomplete","response":{"status":"incomplete",)"
           R"("incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":2,"output_tokens":4}}})");
  CHECK(cut.finished);
  CHECK(cut.completion_tokens == 4u);
  CHECK_FALSE(cut.total_tokens.has_value());
  auto bare = read(R"({"type":"response.completed"})");  // ended, its usage unsaid
  CHECK(bare.finished);
  CHECK_FALSE(bare.completion_tokens.has_value());
  CHECK(read("[DONE]").kind == Kind::done);
}

TEST_CASE("responses API: error events, failed responses and malformed payloads") {
  auto err = read(R"({"type":"error","code":"server_error","message":"the engine died","sequence_number":4})");
  CHECK(err.kind == Kind::error);
  CHECK(err.error_message == "the engine died");
  auto failed = read(R"({"type":"response.failed","response":{"status":"failed",)"
                     R"("error":{"code":"server_error","message":"out of memory"}}})");
  CHECK(failed.kind == Kind::error);
  CHECK(failed.error_message == "out of memory");
  auto chat_style = read(R"({"error":{"message":"bad model","type":"invalid_request_error"}})");
  CHECK(chat_style.kind == Kind::error);
  CHECK(chat_style.error_message == "bad model");
  for (const char* bad : {"not json", R"({"type":"response.output_text.delta","delta":"x")",
                          R"({"type":"response.output_text.delta","delta":"x"} trailing)", R"(["a"])",
                          R"({"type":"response.output_text.delta","delta":tru})",
                          R"({"type":"response.completed","response":[1]})", R"({"a":"unterminated)"}) {
    INFO(bad);
    CHECK(read(bad).kind == Kind::malformed);
  }
}

TEST_CASE("responses API: a whole answer's usage is read from its response object") {
  const auto& row = api_row(Api::responses);
  auto u = row.read_body(R"({"id":"resp_1","object":"response","status":"completed","output":[],)"
                         R"("usage":{"input_tokens":5,"output_tokens":9,"total_tokens":14}})");
  REQUIRE(u);
  CHECK(u->prompt == 5u);
  CHECK(u->completion == 9u);
  CHECK(u->total == 14u);
  auto none = row.read_body(R"({"id":"resp_1","output":[]})");
  REQUIRE(none);
  CHECK_FALSE(none->completion.has_value());
  CHECK_FALSE(row.read_body("[1, 2]").has_value());
  CHECK_FALSE(row.read_body("{").has_value());
  // Chat's reader reads chat's fields, not these.
  auto chat = api_row(Api::chat).read_body(R"({"usage":{"prompt_tokens":3,"completion_tokens":4,)"
                                           R"("completion_tokens_details":{"reasoning_tokens":2}}})");
  REQUIRE(chat);
  CHECK(chat->completion == 4u);
  CHECK(chat->reasoning == 2u);
  CHECK_FALSE(api_row(Api::chat).read_body("nope").has_value());
}

TEST_CASE("responses API: a turn of a conversation the server keeps is stored and names the answer it continues") {
  const Target t = responses_target(true);
  const auto first = json::parse(completion_body(t, {}, 8, R"([{"role":"user","content":"a"}])", ""));
  CHECK(first.at("store") == true);
  CHECK_FALSE(first.contains("previous_response_id"));
  const auto next = json::parse(completion_body(t, {}, 8, R"([{"role":"user","content":"b"}])", "resp_7"));
  CHECK(next.at("store") == true);
  CHECK(next.at("previous_response_id") == "resp_7");
  REQUIRE(next.at("input").size() == 1);
  CHECK(next.at("input")[0].at("content") == "b");
  // Chat keeps no conversation: its row has no keep_state, and its body stays its own.
  CHECK_FALSE(api_row(Api::chat).keep_state);
  auto chat = parse_target(json{{"base_url", "http://127.0.0.1:8000"}, {"api", "chat"}, {"model", "m"}});
  REQUIRE(chat.has_value());
  const auto chat_body = json::parse(completion_body(*chat, {}, 8, R"([{"role":"user","content":"b"}])", "x"));
  CHECK_FALSE(chat_body.contains("previous_response_id"));
  CHECK_FALSE(chat_body.contains("store"));
}

// Real servers' streams through the real client: each fixture is the bytes a server sends
// (written from the server's public docs and source, not captured), replayed by a raw server
// on loopback in pieces 20 ms apart, so a record's first token, its chunks and its outcome
// are the client's own reading.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "llm/client.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

const char* kSseHead = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

std::string sse(std::initializer_list<const char*> events) {
  std::string out;
  for (const char* e : events) out += std::string("data: ") + e + "\n\n";
  return out;
}

// Answers one request with `head`, then each of `pieces` 20 ms apart, then closes (the body
// is close-delimited, as a server without chunked encoding sends a stream).
class PacedServer {
 public:
  PacedServer(std::string head, std::vector<std::string> pieces)
      : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this, head = std::move(head), pieces = std::move(pieces)] {
      boost::system::error_code ec;
      asio::ip::tcp::socket s(io_);
      acceptor_.accept(s, ec);
      if (ec) return;
      char buf[16384];
      s.read_some(asio::buffer(buf), ec);
      asio::write(s, asio::buffer(head), ec);
      for (const auto& p : pieces) {
        std::this_thread::sleep_for(20ms);
        asio::write(s, asio::buffer(p), ec);
      }
      s.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    });
  }
  ~PacedServer() { thread_.join(); }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }

 private:
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
};

// One chat (or `api`) request to a server that sends `head` and then `events` (each SSE event
// a piece).
RequestRecord replay(std::vector<std::string> pieces, const char* head = kSseHead, llm::Api api = llm::Api::chat) {
  PacedServer server(head, std::move(pieces));
  llm::Target t;
  t.port = server.port();
  t.api = api;
  t.model = "m";
  t.read_timeout = 5s;
  t.request_timeout = 10s;
  asio::io_context io;
  llm::Client client(io.get_executor(), t);
  RequestRecord rec;
  RequestIds ids{"r", {}};
  asio::co_spawn(io, client.send(llm::completion_body(t, "hi", 8), rec, SteadyClock::now(), ids), asio::detached);
  io.run_for(15s);
  return rec;
}

std::vector<std::string> each(std::initializer_list<const char*> events) {
  std::vector<std::string> out;
  for (const char* e : events) out.push_back(sse({e}));
  return out;
}

// The Responses API's named events, each a piece: {event name, data}.
std::vector<std::string> named(std::initializer_list<std::pair<const char*, const char*>> events) {
  std::vector<std::string> out;
  for (const auto& [name, data] : events) out.push_back(std::string("event: ") + name + "\ndata: " + data + "\n\n");
  return out;
}

RequestRecord replay_responses(std::vector<std::string> pieces) {
  return replay(std::move(pieces), kSseHead, llm::Api::responses);
}

}  // namespace

TEST_CASE("streams: a tool call's deltas are output tokens, the first one the first token (vLLM, OpenAI)") {
  const RequestRecord r = replay(each(
      {R"({"choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]})",
       R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]})",
       R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": "}}]},"finish_reason":null}]})",
       R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]})",
       R"({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})", "[DONE]"}));
  CHECK(r.outcome == Outcome::ok);
  REQUIRE(r.chunks.size() == 3);
  CHECK(r.chunks.front().arrival < r.chunks.back().arrival);  // the first token is the name's, not the end's
}

TEST_CASE("streams: a refusal is streamed text the user sees (OpenAI)") {
  const RequestRecord r = replay(each({R"({"choices":[{"index":0,"delta":{"role":"assistant","refusal":""}}]})",
                                       R"({"choices":[{"index":0,"delta":{"refusal":"I can't"}}]})",
                                       R"({"choices":[{"index":0,"delta":{"refusal":" help with that."}}]})",
                                       R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})", "[DONE]"}));
  CHECK(r.outcome == Outcome::ok);
  CHECK(r.chunks.size() == 2);
  CHECK(!r.chunks.front().reasoning);
}

TEST_CASE("streams: content as an array of thinking and text parts is read chunk by chunk (Mistral, gateways)") {
  const RequestRecord r = replay(each(
      {R"({"choices":[{"index":0,"delta":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"Let me"}]}]}}]})",
       R"({"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":"think."}]}}]})",
       R"({"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"The answer"}]}}]})",
       R"({"choices":[{"index":0,"delta":{"content":[{"text":" is 4.","type":"text"}]}}]})",
       R"({"choices":[{"index":0,"delta":{"content":[]},"finish_reason":"stop"}]})", "[DONE]"}));
  CHECK(r.outcome == Outcome::ok);
  REQUIRE(r.chunks.size() == 4);
  CHECK(r.chunks[0].reasoning);
  CHECK(r.chunks[1].reasoning);
  CHECK(!r.chunks[2].reasoning);
  CHECK(r.chunks[3].arrival - r.chunks[0].arrival >= 40ms);  // TTFT is not E2EL
  CHECK(r.reasoning_tokens == 2);
  REQUIRE(r.first_output_token());
  CHECK(*r.first_output_token() == r.chunks[2].arrival);
}

TEST_CASE("streams: a stream cut at EOF without a finish reason or [DONE] is truncated, not a success") {
  const RequestRecord cut = replay(each({R"({"choices":[{"index":0,"delta":{"content":"Hello"}}]})",
                                         R"({"choices":[{"index":0,"delta":{"content":" wor"}}]})"}));
  CHECK(cut.outcome == Outcome::truncated);
  CHECK(cut.error_message.find("without a finish reason") != std::string::npos);
  // A finish reason without [DONE] (some servers omit it) is a whole answer.
  const RequestRecord finished = replay(each({R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})",
                                              R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"}));
  CHECK(finished.outcome == Outcome::ok);
}

TEST_CASE("streams: llama.cpp's error line reaches the record with the server's message") {
  const RequestRecord r = replay({sse({R"({"choices":[{"index":0,"delta":{"content":"Hi"}}]})"}),
                                  "error: {\"error\":{\"code\":500,\"message\":\"the request exceeds the available "
                                  "context size\",\"type\":\"exceed_context_size_error\"}}\n\n"});
  CHECK(r.outcome == Outcome::stream_error);
  CHECK(r.error_message == "the request exceeds the available context size");
}

TEST_CASE("streams: an error answer's message reaches the record (vLLM's 400)") {
  const std::string body =
      R"({"object":"error","message":"max_tokens is too large","type":"BadRequestError","code":400})";
  const std::string head =
      "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\n\r\n";
  const RequestRecord r = replay({body}, head.c_str());
  CHECK(r.outcome == Outcome::http_4xx);
  CHECK(r.error_message == "HTTP 400: max_tokens is too large");
}

TEST_CASE("streams: reasoning counted outside completion_tokens is added to the generated tokens") {
  // total_tokens = prompt + completion + reasoning: 10 + 2 + 6.
  const RequestRecord r = replay(each(
      {R"({"choices":[{"index":0,"delta":{"reasoning_content":"a"}}]})",
       R"({"choices":[{"index":0,"delta":{"reasoning_content":"b"}}]})",
       R"({"choices":[{"index":0,"delta":{"content":"Yes"}}]})",
       R"({"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})",
       R"({"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":18,"completion_tokens_details":{"reasoning_tokens":6}}})",
       "[DONE]"}));
  CHECK(r.outcome == Outcome::ok);
  CHECK(r.output_tokens == 8);
  CHECK(r.reasoning_tokens == 6);
  CHECK(r.input_tokens == 10);
}

TEST_CASE("streams: a Responses API stream with reasoning: its deltas are the tokens, response.completed the end") {
  // As vLLM streams a reasoning model's answer over /v1/responses (no [DONE] follows).
  const RequestRecord r = replay_responses(named(
      {{"response.created",
        R"({"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress","output":[],"usage":null}})"},
       {"response.output_item.added",
        R"({"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"reasoning","id":"rs_1"}})"},
       {"response.reasoning_text.delta",
        R"({"type":"response.reasoning_text.delta","sequence_number":2,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"Let me"})"},
       {"response.reasoning_text.delta",
        R"({"type":"response.reasoning_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"content_index":0,"delta":" think."})"},
       {"response.output_text.delta",
        R"({"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"Four"})"},
       {"response.output_text.delta",
        R"({"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"."})"},
       {"response.output_text.done",
        R"({"type":"response.output_text.done","sequence_number":6,"item_id":"msg_1","output_index":1,"content_index":0,"text":"Four."})"},
       {"response.completed",
        R"({"type":"response.completed","sequence_number":7,"response":{"id":"resp_1","status":"completed","output":[],)"
        R"("usage":{"input_tokens":11,"output_tokens":5,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":16}}})"}}));
  CHECK(r.outcome == Outcome::ok);
  REQUIRE(r.chunks.size() == 4);
  CHECK(r.chunks[0].reasoning);
  CHECK(r.chunks[1].reasoning);
  CHECK(!r.chunks[2].reasoning);
  CHECK(r.chunks[3].arrival - r.chunks[0].arrival >= 40ms);  // TTFT is not E2EL
  REQUIRE(r.first_output_token());
  CHECK(*r.first_output_token() == r.chunks[2].arrival);
  CHECK(r.output_tokens == 5);
  CHECK_FALSE(r.output_tokens_estimated);
  CHECK(r.reasoning_tokens == 3);
  CHECK(r.input_tokens == 11);
}

TEST_CASE("streams: a Responses stream cut before response.completed is truncated, and an error event fails it") {
  const RequestRecord cut = replay_responses(named(
      {{"response.created", R"({"type":"response.created","response":{"id":"resp_2","output":[]}})"},
       {"response.output_text.delta", R"({"type":"response.output_text.delta","output_index":0,"delta":"Hel"})"}}));
  CHECK(cut.outcome == Outcome::truncated);
  CHECK(cut.chunks.size() == 1);
  const RequestRecord failed = replay_responses(named(
      {{"response.output_text.delta", R"({"type":"response.output_text.delta","output_index":0,"delta":"Hi"})"},
       {"error", R"({"type":"error","code":"server_error","message":"the engine is overloaded","param":null})"}}));
  CHECK(failed.outcome == Outcome::stream_error);
  CHECK(failed.error_message == "the engine is overloaded");
  // Cut at max_output_tokens: response.incomplete ends a whole answer.
  const RequestRecord capped = replay_responses(named(
      {{"response.output_text.delta", R"({"type":"response.output_text.delta","output_index":0,"delta":"a b"})"},
       {"response.incomplete",
        R"({"type":"response.incomplete","response":{"status":"incomplete",)"
        R"("incomplete_details":{"reason":"max_output_tokens"},"usage":{"input_tokens":2,"output_tokens":2}}})"}}));
  CHECK(capped.outcome == Outcome::ok);
  CHECK(capped.output_tokens == 2);
}

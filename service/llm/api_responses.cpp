// The Responses API (POST /v1/responses) as a row of the target-API table: the request's
// `input` (the prompt, or a session's turns as messages) and `max_output_tokens`; its stream of
// typed events, each read by its top-level members only ("type", "delta"; llm/json_scan), with the one
// terminal event (response.completed / response.incomplete) parsed whole for its usage; a
// whole answer's usage (input_tokens, output_tokens, their details).
#include <nlohmann/json.hpp>

#include "core/json_access.hpp"
#include "llm/api_rows.hpp"
#include "llm/json_scan.hpp"

namespace capsweep::llm {

namespace {

using json = nlohmann::json;

// A response object's usage: input_tokens, output_tokens (reasoning inside), their details.
UsageCounts response_usage(const json& response) {
  const json& usage = json_at(response, "usage");
  return {.prompt = json_count(usage, "input_tokens"),
          .completion = json_count(usage, "output_tokens"),
          .reasoning = json_count(json_at(usage, "output_tokens_details"), "reasoning_tokens"),
          .total = json_count(usage, "total_tokens")};
}

// The message of an error object (or of a bare string), at most 200 bytes.
std::string error_text(std::string_view raw) {
  const json e = json::parse(raw, nullptr, false);
  std::string m = e.is_string() ? e.get<std::string>() : "";
  if (e.is_object() && e.contains("message") && e["message"].is_string()) m = e["message"].get<std::string>();
  return m.empty() ? std::string("error event") : m.substr(0, 200);
}

// The terminal events: completed or incomplete (max_output_tokens reached) end the answer
// with its usage; failed is an error.
StreamChunk terminal_event(std::string_view type, std::string_view response_raw) {
  StreamChunk c;
  // Without its response object the answer still ended, its usage unsaid.
  const json r = response_raw.empty() ? json::object() : json::parse(response_raw, nullptr, false);
  if (!r.is_object()) return c;  // malformed
  if (type == "response.failed") {
    c.kind = StreamChunk::Kind::error;
    c.error_message = r.contains("error") ? error_text(r["error"].dump()) : "response.failed";
    return c;
  }
  const UsageCounts u = response_usage(r);
  c.kind = StreamChunk::Kind::empty;
  c.finished = true;
  c.prompt_tokens = u.prompt;
  c.completion_tokens = u.completion;
  c.reasoning_tokens = u.reasoning;
  c.total_tokens = u.total;
  return c;
}

StreamChunk read_event(std::string_view data) {
  while (!data.empty() && (data.back() == ' ' || data.back() == '\r' || data.back() == '\n')) data.remove_suffix(1);
  StreamChunk c;
  if (data == "[DONE]") {
    c.kind = StreamChunk::Kind::done;
    return c;
  }
  JsonMembers t;
  if (!t.parse(data)) return c;  // malformed
  const std::string_view type = unquote(t.get("type"));
  const std::string_view error = t.get("error");
  if (type == "error" || (type.empty() && !error.empty() && error != "null")) {
    c.kind = StreamChunk::Kind::error;
    c.error_message = error_text(!error.empty() ? error : t.get("message"));
    return c;
  }
  if (type == "response.completed" || type == "response.incomplete" || type == "response.failed") {
    return terminal_event(type, t.get("response"));
  }
  c.kind = StreamChunk::Kind::empty;
  const bool delta = type.size() > 6 && type.substr(type.size() - 6) == ".delta";
  if (delta && !unquote(t.get("delta")).empty()) {
    c.kind = StreamChunk::Kind::content;
    // Reasoning text (vLLM's reasoning_text, OpenAI's reasoning_summary_text) is a token the
    // user does not see; output text, a refusal and a call's arguments are ones they do.
    c.reasoning = type.find("reasoning") != std::string_view::npos;
    c.tool_call = type.find("function_call_arguments") != std::string_view::npos;
  }
  return c;
}

std::optional<UsageCounts> read_body(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  return response_usage(j);
}

}  // namespace

ApiRow responses_row() {
  ApiRow r;
  r.name = "responses";
  r.path = "/v1/responses";
  r.messages = true;
  r.request = [](json& body, const RequestText& text) {
    body["input"] = text.messages.empty() ? json(text.prompt) : json::parse(text.messages, nullptr, false);
    body["max_output_tokens"] = text.max_tokens;
    // A load test's answers are not kept on the server unless the spec asks (extra_body).
    if (!body.contains("store")) body["store"] = false;
  };
  r.read_chunk = read_event;
  r.read_body = read_body;
  r.stream_usage_option = false;
  r.quality = false;
  r.keep_state = [](json& body, std::string_view previous_id) {
    body["store"] = true;  // the next turn continues this answer
    if (!previous_id.empty()) body["previous_response_id"] = previous_id;
  };
  return r;
}

}  // namespace capsweep::llm

// The Responses API's side of capsweep-llmsim's formatter (POST /v1/responses), as vLLM and
// OpenAI stream it: named SSE events, response.created first, one text (or reasoning) delta
// event per chunk of tokens, and response.completed (response.incomplete when the answer ran
// into max_output_tokens) last, carrying the whole response with its usage. No [DONE].
#include <fmt/format.h>

#include "llmsim/openai.hpp"

namespace capsweep::llmsim {

namespace {

using json = nlohmann::json;

void append_event(std::string& out, std::string_view type, const json& payload) {
  out += "event: ";
  out += type;
  out += "\ndata: ";
  out += payload.dump();
  out += "\n\n";
}

}  // namespace

void ChunkFormatter::append_response_created(std::string& out) const {
  json r{{"id", id_},           {"object", "response"},    {"created_at", created_}, {"status", "in_progress"},
         {"model", req_.model}, {"output", json::array()}, {"usage", nullptr}};
  append_event(out, "response.created", {{"type", "response.created"}, {"sequence_number", 0}, {"response", r}});
}

void ChunkFormatter::append_response_delta(std::string& out, std::uint32_t first, std::uint32_t count) const {
  const bool reasoning = first < req_.reasoning_tokens;  // the caller never lets a chunk straddle
  const std::string_view type = reasoning ? "response.reasoning_text.delta" : "response.output_text.delta";
  out += "event: ";
  out += type;
  out += fmt::format(R"(
data: {{"type":"{}","sequence_number":{},"item_id":"{}_{}","output_index":{},"content_index":0,"delta":")",
                     type, first + 1, reasoning ? "rs" : "msg", id_, !reasoning && req_.reasoning_tokens > 0 ? 1 : 0);
  append_text(out, first, count);
  out += "\"}\n\n";
}

void ChunkFormatter::append_response_end(std::string& out, std::uint32_t completion_tokens) const {
  const json r = response_object(completion_tokens);
  const std::string type = "response." + r.at("status").get<std::string>();
  append_event(out, type, {{"type", type}, {"sequence_number", completion_tokens + 1}, {"response", r}});
}

json ChunkFormatter::response_object(std::uint32_t completion_tokens) const {
  std::string text, reasoning;
  for (std::uint32_t i = 0; i < completion_tokens; ++i) (i < req_.reasoning_tokens ? reasoning : text) += piece(i);
  const std::uint32_t reasoning_tokens = std::min(req_.reasoning_tokens, completion_tokens);
  const bool cut = finish_reason(completion_tokens) == "length";
  json output = json::array();
  if (reasoning_tokens > 0) {
    output.push_back({{"type", "reasoning"},
                      {"id", "rs_" + id_},
                      {"summary", json::array()},
                      {"content", json::array({{{"type", "reasoning_text"}, {"text", reasoning}}})}});
  }
  output.push_back(
      {{"type", "message"},
       {"id", "msg_" + id_},
       {"role", "assistant"},
       {"status", cut ? "incomplete" : "completed"},
       {"content", json::array({{{"type", "output_text"}, {"text", text}, {"annotations", json::array()}}})}});
  json usage{{"input_tokens", req_.prompt_tokens},
             {"input_tokens_details", {{"cached_tokens", 0}}},
             {"output_tokens", completion_tokens},
             {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
             {"total_tokens", req_.prompt_tokens + completion_tokens}};
  return {{"id", id_},
          {"object", "response"},
          {"created_at", created_},
          {"model", req_.model},
          {"status", cut ? "incomplete" : "completed"},
          {"incomplete_details", cut ? json{{"reason", "max_output_tokens"}} : json(nullptr)},
          {"output", std::move(output)},
          {"usage", std::move(usage)}};
}

}  // namespace capsweep::llmsim

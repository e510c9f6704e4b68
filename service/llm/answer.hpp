#pragma once
// A quality request and its answer read back (regression jobs): the body asking a target one
// dataset item at temperature 0, and the finished answer assembled from what came back, the
// SSE data payloads of a streamed answer or the body of a whole one: its text, its tool calls
// reassembled from their deltas, its finish_reason and usage. Pure; never on a timed step.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/quality.hpp"
#include "llm/dataset.hpp"
#include "llm/target.hpp"

namespace capsweep::llm {

// Read from chat, completions and Responses API payloads alike (a Responses answer's text is
// its output_text; its finish_reason "stop" when completed, "length" when incomplete).
struct Answer {
  std::string text;                  // the content (chat) or text (completions), concatenated
  std::vector<ToolCall> tool_calls;  // in index order
  std::string finish_reason;         // "" when none came
  // The answer's id (a chat chunk's "id", a Responses response's): what a turn of a
  // conversation the server keeps continues (previous_response_id). "" when none came.
  std::string id;
  std::optional<std::uint64_t> completion_tokens, prompt_tokens;
  std::string error;       // an error event's message (at most 200 bytes), "" when none
  bool malformed = false;  // a payload that was not JSON, or nested too deep
};
Answer assemble_answer(const std::vector<std::string>& events);

// The body asking `t` item `e`: temperature 0 and `seed`, the item's max_tokens (else
// `default_max_tokens`), its response_format, tools and tool_choice, its chat messages (or its
// prompt as one user turn; a completions target gets the prompt); streamed with usage when the
// target streams; extra_body merged; ignore_eos never set (lengths are what is checked).
std::string quality_body(const Target& t, const DatasetEntry& e, std::uint32_t default_max_tokens, std::uint64_t seed);

// The max_tokens quality_body asks for item `e`.
std::uint32_t quality_max_tokens(const DatasetEntry& e, std::uint32_t default_max_tokens);

// The body asking a judge model to score one answer: `prompt` as one user turn, temperature 0,
// at most 16 tokens.
std::string judge_body(const Target& t, const std::string& prompt);
// The first whole number in a judge's answer within [1, scale]; nullopt when there is none.
std::optional<double> judge_score(std::string_view answer, std::uint32_t scale);

}  // namespace capsweep::llm

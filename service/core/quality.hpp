#pragma once
// Quality checks on a finished answer (regression jobs): does it parse as JSON, are its tool
// calls well-formed calls of an offered tool, does its length respect max_tokens and agree
// with its finish_reason, does it match an expected answer, are two answers the same. Pure:
// the answer's text and metadata in, a verdict with the reason out. Checking against a JSON
// Schema is the caller's (it holds the validator); these functions say what to check it on.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace capsweep {

struct QualityVerdict {
  bool ok = false;
  std::string reason;  // why not, "" when ok
};

// response_format json_object: the whole answer (surrounding whitespace aside) is one JSON
// object. A Markdown code fence around it is a failure: a client parsing the answer would fail.
QualityVerdict check_json_answer(std::string_view answer);
// The parsed answer, when check_json_answer holds (for a schema check by the caller).
std::optional<nlohmann::json> answer_json(std::string_view answer);

// One tool call as streamed: the name and the argument text reassembled from the deltas.
struct ToolCall {
  std::string name;
  std::string arguments;
};
// Every call names a tool the request offered (`tools`: OpenAI's [{"type": "function",
// "function": {"name", "parameters"}}]) and its arguments parse as a JSON object; with
// tool_choice "required" (or a named function) at least one call is made.
QualityVerdict check_tool_calls(const std::vector<ToolCall>& calls, const nlohmann::json& tools,
                                const nlohmann::json& tool_choice = nullptr);
// The parameters schema of the offered tool `name` (null when it has none).
nlohmann::json tool_parameters(const nlohmann::json& tools, const std::string& name);

// completion_tokens <= max_tokens, and finish_reason consistent with it: "length" only at
// the cap, and an answer at the cap that claims "stop" is accepted (the model may end there).
QualityVerdict check_length(std::uint64_t completion_tokens, std::uint64_t max_tokens, std::string_view finish_reason);

// expect: {"answer": "..."} (exact after trimming whitespace) or {"contains": "..."} (a
// substring). No regular expressions: a pattern from a dataset run by a backtracking matcher
// against a target's answer could take exponential time or overflow the stack.
QualityVerdict check_expected(std::string_view answer, const nlohmann::json& expect);

// Determinism: byte-identical answers.
inline bool same_answer(std::string_view a, std::string_view b) {
  return a == b;
}

}  // namespace capsweep

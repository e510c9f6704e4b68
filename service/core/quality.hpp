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

// Answers and schemas nested deeper than this are not parsed (a hostile target's answer of
// endless brackets would otherwise exhaust a recursive validator's stack).
inline constexpr int kMaxAnswerDepth = 64;
// Whether JSON text opens more than `max_depth` containers at once (a byte scan, strings skipped).
bool json_nesting_exceeds(std::string_view text, int max_depth = kMaxAnswerDepth);

// response_format json_object: the whole answer (surrounding whitespace aside) is one JSON
// object. A Markdown code fence around it is a failure: a client parsing the answer would fail.
QualityVerdict check_json_answer(std::string_view answer);
// The parsed answer, when check_json_answer holds (for a schema check by the caller).
std::optional<nlohmann::json> answer_json(std::string_view answer);

// Whether `instance` is valid against the JSON Schema `schema` (draft 7). The keywords that
// need a regular expression (pattern, patternProperties, format) are not checked: the
// standard library's matcher backtracks and recurses, so a schema from a dataset and an answer
// from a target could hang the service or overflow its stack. A schema that cannot be read
// (a remote $ref, a malformed keyword) fails with that reason.
QualityVerdict check_schema(const nlohmann::json& instance, const nlohmann::json& schema);
// What keeps a schema from being used (for uploads); nullopt when it can be.
std::optional<std::string> schema_problem(const nlohmann::json& schema);
// The schema as check_schema applies it: the regular-expression keywords removed.
nlohmann::json without_regex_keywords(const nlohmann::json& schema);

// One tool call as streamed: the name and the argument text reassembled from the deltas.
struct ToolCall {
  std::string name;
  std::string arguments;
};
// Every call names a tool the request offered (`tools`: OpenAI's [{"type": "function",
// "function": {"name", "parameters"}}]), its arguments parse as a JSON object valid against
// the tool's parameters schema (when it has one); with tool_choice "required" (or a named
// function) at least one call is made, and with "none" none is.
QualityVerdict check_tool_calls(const std::vector<ToolCall>& calls, const nlohmann::json& tools,
                                const nlohmann::json& tool_choice = nullptr);
// The parameters schema of the offered tool `name` (null when it has none).
nlohmann::json tool_parameters(const nlohmann::json& tools, const std::string& name);

// completion_tokens <= max_tokens, and finish_reason consistent with it: "length" only at
// the cap, and an answer at the cap that claims "stop" is accepted (the model may end there).
QualityVerdict check_length(std::uint64_t completion_tokens, std::uint64_t max_tokens, std::string_view finish_reason);

// expect: {"answer": "..."} (exact after trimming whitespace), {"contains": "..."} (a
// substring) or {"regex": "..."} (RE2 syntax, searched anywhere in the answer; RE2 runs in
// time linear in the answer and never backtracks, so a dataset's pattern cannot hang the
// service). A given "answer" is also the reference a judge sees.
QualityVerdict check_expected(std::string_view answer, const nlohmann::json& expect);
// What is wrong with an item's expect object (for uploads); nullopt when it is usable.
std::optional<std::string> expect_problem(const nlohmann::json& expect);

// Determinism: byte-identical answers.
inline bool same_answer(std::string_view a, std::string_view b) {
  return a == b;
}

}  // namespace capsweep

#pragma once
// The OpenAI-compatible surface of capsweep-llmsim: parsing completion / chat requests and
// formatting their responses and SSE chunks the way vLLM does. Prompt tokens are counted as
// whitespace-separated words; generated text is one word per token, deterministic per seed.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace capsweep::llmsim {

enum class Api { completions, chat, responses };

struct CompletionRequest {
  Api api = Api::completions;
  std::string model;
  std::uint32_t prompt_tokens = 0;
  // The prompt's full blocks of kBlockTokens words, each named by a hash chained over every
  // word before its end (the prefix cache's keys; chat turns' roles are mixed in uncounted).
  std::vector<std::uint64_t> blocks;
  std::uint32_t max_tokens = 16;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats
  bool ignore_eos = false;        // accepted; the simulator always generates max_tokens
  std::uint64_t text_seed = 0;    // mixes the request's seed and its prompt
  bool sampled = false;           // temperature > 0 without a seed: the text differs every time
  // What shapes a structured answer (absent: null): response_format, tools, tool_choice, and
  // the last user turn's text (an arithmetic question is answered).
  nlohmann::json response_format, tools, tool_choice;
  std::string question;
  // A structured answer (answers.hpp): its text one piece per token, and how it ends; empty
  // pieces: the word stream.
  struct Script {
    bool tool_call = false;  // the pieces are a call's arguments
    std::string tool_name;
    std::vector<std::string> pieces;
    std::string finish_reason = "stop";  // once every piece was generated ("tool_calls" for a call)
  } script;
  std::uint32_t reported_tokens_extra = 0;  // the overrun fault: tokens generated past max_tokens
  // Chat word-stream answers of a reasoning model: the first tokens are reasoning, not content.
  std::uint32_t reasoning_tokens = 0;
  // Responses: whether the server keeps the answer (store, default true as OpenAI's) and the
  // kept answer this request continues ("" for none): its conversation is this prompt's start.
  bool store = true;
  std::string previous_response_id;
};

// An OpenAI-style error: HTTP status and the body's message / type / param.
struct ApiError {
  unsigned status = 400;
  std::string message;
  std::string type = "BadRequestError";
  std::string param;  // the request field at fault, "" when none
};
// {"error": {"message", "type", "param", "code"}}
std::string error_body(const ApiError& e);

// Parses a /v1/completions, /v1/chat/completions or /v1/responses body (its `input`: a text
// or messages; its `max_output_tokens`). `served_models` are the models served (the base model
// and its adapters); a request
// without a token cap gets OpenAI's default (completions: 16, else 256).
std::optional<CompletionRequest> parse_completion_request(std::string_view body, Api api,
                                                          const std::vector<std::string>& served_models,
                                                          std::uint64_t server_seed, ApiError& error);
// The same for one served model.
std::optional<CompletionRequest> parse_completion_request(std::string_view body, Api api, std::string_view served_model,
                                                          std::uint64_t server_seed, ApiError& error);

// The word generated as token `index` of a request with text seed `seed` (with its space).
std::string_view token_text(std::uint64_t seed, std::uint32_t index) noexcept;

// Formats SSE chunks of one streamed response into caller-owned buffers without allocating
// per token once the buffer has grown.
class ChunkFormatter {
 public:
  ChunkFormatter(const CompletionRequest& req, std::string_view id, std::int64_t created);

  // Chat: the role-only first chunk ({"delta": {"role": "assistant", "content": ""}});
  // Responses: the response.created event.
  void append_role(std::string& out) const;
  // A content chunk carrying tokens [first, first + count) (a tool call's argument delta when
  // the script is a call); `completion_tokens` is the total generated so far (for continuous
  // usage); `finished` sets the finish_reason ("length", or the script's own end).
  void append_tokens(std::string& out, std::uint32_t first, std::uint32_t count, std::uint32_t completion_tokens,
                     bool finished) const;
  // The stream's end: the usage-only chunk (choices empty) when include_usage is set, then
  // "data: [DONE]"; a Responses stream's response.completed (or .incomplete) event instead,
  // with the whole response and its usage.
  void append_end(std::string& out, std::uint32_t completion_tokens) const;

  // The non-streaming response body for a finished request.
  std::string full_response(std::uint32_t completion_tokens) const;

 private:
  void append_usage_object(std::string& out, std::uint32_t completion_tokens) const;
  // The Responses API's events and object (responses.cpp).
  void append_response_created(std::string& out) const;
  void append_response_delta(std::string& out, std::uint32_t first, std::uint32_t count) const;
  void append_response_end(std::string& out, std::uint32_t completion_tokens) const;
  nlohmann::json response_object(std::uint32_t completion_tokens) const;
  // Tokens [first, first + count)'s text, escaped for a JSON string.
  void append_text(std::string& out, std::uint32_t first, std::uint32_t count) const;
  // The text of token `index`: the script's piece, else a word of the stream.
  std::string_view piece(std::uint32_t index) const;
  // How an answer of `completion_tokens` tokens ends.
  std::string_view finish_reason(std::uint32_t completion_tokens) const;
  const CompletionRequest& req_;
  std::string id_;
  std::int64_t created_;
  std::string head_;  // 'data: {"id":...,"model":...,"choices":[{"index":0,'
};

}  // namespace capsweep::llmsim

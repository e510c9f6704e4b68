#pragma once
// The target APIs: one row per API a target may speak (the spec's target.api). A row says the
// path it posts to, the request body's own fields, how one SSE data payload of its stream is
// read (what is a token, what is the end, its usage figures) and whether it takes chat
// messages. The transport under every row is the same (loadgen::Endpoint, llm::Client).

#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llm/openai_stream.hpp"

namespace capsweep::llm {

// The five named here first, then any that register_api adds (their values follow theirs).
enum class Api : std::uint8_t { completions, chat, responses, embeddings, rerank };

// What one request sends, for a row to put into its body.
struct RequestText {
  std::string_view prompt = {};              // the prompt; rerank: the query
  std::string_view messages = {};            // chat messages (a JSON array's text); "" for none
  std::span<const std::string> inputs = {};  // the items of the request (embeddings' inputs, rerank's documents)
  std::uint32_t max_tokens = 1;
  std::string_view model = {};  // the model asked for ("": the target's)
};

struct ApiRow {
  std::string name;
  std::string path;       // below the target's base path: "/v1/completions"
  bool messages = false;  // takes chat messages: a session's history, a quality item's tools
  // The body's own fields: the prompt (or `messages`, a JSON array's text, where the row takes
  // them), the items, the cap on the tokens generated. The model, stream and extra_body are common.
  std::function<void(nlohmann::json& body, const RequestText& text)> request = {};
  // One SSE data payload of its stream, read.
  StreamChunk (*read_chunk)(std::string_view data) = interpret_chunk;
  // A whole (non-streamed) answer's body, read: its usage figures (nullopt: not an answer).
  std::optional<UsageCounts> (*read_body)(std::string_view body) = read_answer_usage;
  // Takes stream_options {include_usage, continuous_usage_stats} (chat's and completions').
  bool stream_usage_option = true;
  // Its answers can be read for the quality checks of a regression (assemble_answer).
  bool quality = true;
  // A turn of a conversation the server keeps (sessions' history "server_state"): marks the
  // body so that the server keeps its answer and names the answer it continues ("" for the
  // first turn). Null: the API keeps no conversation.
  std::function<void(nlohmann::json& body, std::string_view previous_id)> keep_state = {};
  // Its answers are generated tokens (streamed or whole). False: an answer of no generated
  // tokens (embeddings, rerank), never streamed, its latency the whole answer's (E2EL); its
  // body gets no stream, stream_options or ignore_eos.
  bool generates = true;
  // A request of several items (workload.inputs_per_request, documents_per_request): the
  // workload key of their count ("" for none), whether the prompt goes with them as a query,
  // and whether an answer must hold one result per item (else at least one, at most all).
  std::string items_key = {};
  bool items_query = false;
  bool items_exact = true;
  // Spec fields of its body that extra_body may not set (beyond the common ones).
  std::vector<std::string> own_fields = {};
};

// The row of an API (completions' for a value no row has).
const ApiRow& api_row(Api a) noexcept;
// Adds an API to the table (at start-up, before specs are parsed); its value. Throws
// std::invalid_argument for a taken or empty name, a path not starting with '/', a row
// without a request or a reader (of a stream and of a body), or a full table.
Api register_api(ApiRow row);
// Every API's name, in the table's order (the spec schema's enum).
std::vector<std::string> api_names();
std::string_view to_string(Api a) noexcept;
std::optional<Api> parse_api(std::string_view name) noexcept;

}  // namespace capsweep::llm

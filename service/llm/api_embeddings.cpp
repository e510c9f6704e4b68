// The embeddings API (POST /v1/embeddings) as a row of the target-API table: `input` holds the
// request's inputs (workload.inputs_per_request of them, prompt_tokens each); the answer is
// whole and generates no tokens, so its latency is its E2EL. The answer is read by its top-level
// members only: its `data` counted (one embedding per input), its `usage` read; the vectors
// themselves are skipped, never parsed.
#include <nlohmann/json.hpp>

#include "core/json_access.hpp"
#include "llm/api_rows.hpp"
#include "llm/json_scan.hpp"

namespace capsweep::llm {

namespace {

using json = nlohmann::json;

// A pooling answer (embeddings, rerank): how many results `list_key` holds and the usage's
// input tokens (prompt_tokens, else total_tokens: nothing is generated).
std::optional<UsageCounts> read_pooled(std::string_view body, std::string_view list_key) {
  JsonMembers m;
  if (!m.parse(body)) return std::nullopt;
  UsageCounts u;
  u.items = count_elements(m.get(list_key));
  const json usage = json::parse(m.get("usage"), nullptr, false);
  u.prompt = json_count(usage, "prompt_tokens");
  if (!u.prompt) u.prompt = json_count(usage, "total_tokens");
  u.completion = 0;
  return u;
}

std::optional<UsageCounts> read_embeddings(std::string_view body) {
  return read_pooled(body, "data");
}

}  // namespace

std::optional<UsageCounts> read_rerank_body(std::string_view body) {
  return read_pooled(body, "results");
}

ApiRow embeddings_row() {
  ApiRow r;
  r.name = "embeddings";
  r.path = "/v1/embeddings";
  r.request = [](json& body, const RequestText& text) {
    json inputs = json::array();
    for (const std::string& s : text.inputs) inputs.push_back(s);
    if (inputs.empty()) inputs.push_back(text.prompt);  // one input: the prompt
    body["input"] = std::move(inputs);
    // As OpenAI's own client asks: base64 vectors are a quarter of the bytes of float lists.
    if (!body.contains("encoding_format")) body["encoding_format"] = "base64";
  };
  r.read_body = read_embeddings;
  r.stream_usage_option = false;
  r.quality = false;
  r.generates = false;
  r.items_key = "inputs_per_request";
  r.items_exact = true;
  return r;
}

}  // namespace capsweep::llm

// The rerank API (vLLM's and the Cohere / Jina-style POST /rerank, /v1/rerank) as a row of the
// target-API table: a `query` (the prompt) and its `documents` (workload.documents_per_request
// of them, prompt_tokens each). Like embeddings the answer is whole and generates no tokens:
// its latency is its E2EL; its `results` are counted (at most one per document: a top_n in
// extra_body may ask for fewer) and its usage read.
#include <nlohmann/json.hpp>

#include "llm/api_rows.hpp"

namespace capsweep::llm {

ApiRow rerank_row() {
  ApiRow r;
  r.name = "rerank";
  r.path = "/v1/rerank";
  r.request = [](nlohmann::json& body, const RequestText& text) {
    body["query"] = text.prompt;
    nlohmann::json documents = nlohmann::json::array();
    for (const std::string& s : text.inputs) documents.push_back(s);
    if (documents.empty()) documents.push_back(text.prompt);  // one document: the prompt
    body["documents"] = std::move(documents);
  };
  r.read_body = read_rerank_body;
  r.stream_usage_option = false;
  r.quality = false;
  r.generates = false;
  r.items_key = "documents_per_request";
  r.items_query = true;
  r.items_exact = false;
  r.own_fields = {"query", "documents"};
  return r;
}

}  // namespace capsweep::llm

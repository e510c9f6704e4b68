#pragma once
// capsweep-llmsim's pooling APIs, as vLLM serves them: POST /v1/embeddings (an embedding per
// input) and POST /rerank, /v1/rerank (the Cohere / Jina-style relevance of each document to
// a query). Each input, or each (query, document) pair as a cross-encoder reads it, is one
// prefill-only sequence of the engine (its tokens prefilled, one iteration's worth of output,
// nothing streamed): the answer is whole once every sequence of the request has run.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "llmsim/openai.hpp"

namespace capsweep::llmsim {

enum class PoolKind { embeddings, rerank };

struct PoolingRequest {
  PoolKind kind = PoolKind::embeddings;
  std::string model;
  // Each sequence's tokens (words or token ids): an input, or a query's and a document's.
  std::vector<std::uint32_t> sequences;
  std::uint32_t prompt_tokens = 0;  // over every sequence
  std::size_t top_n = 0;            // rerank: the results returned (every document by default)
  bool base64 = false;              // embeddings: encoding_format "base64" (else "float")
  std::uint64_t text_seed = 0;      // the vectors' and scores' values
};

// Parses an embeddings body ({"model", "input": a text, texts, token ids or lists of them,
// "encoding_format"}) or a rerank body ({"model", "query", "documents": texts or {"text"}
// objects, "top_n"}), for one of `served_models`. Errors as the completions parser's, naming the
// field.
std::optional<PoolingRequest> parse_pooling_request(std::string_view body, PoolKind kind,
                                                    const std::vector<std::string>& served_models, ApiError& error);

// The whole answer: {"object": "list", "data": [{"index", "object": "embedding", "embedding"}],
// "usage"} or {"id", "model", "results": [{"index", "relevance_score"}] best first, "usage"}.
std::string pooling_response(const PoolingRequest& req, std::string_view id);

}  // namespace capsweep::llmsim

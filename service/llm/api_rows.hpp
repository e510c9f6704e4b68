#pragma once
// The rows the target-API table starts with beyond completions and chat, each defined in its
// own file (api_<name>.cpp); api_table.cpp lists them in Api's order.

#include "llm/api_table.hpp"

namespace capsweep::llm {

ApiRow responses_row();   // api_responses.cpp
ApiRow embeddings_row();  // api_embeddings.cpp
ApiRow rerank_row();      // api_rerank.cpp
// A rerank answer's results counted and its usage read (api_embeddings.cpp: one reader of both).
std::optional<UsageCounts> read_rerank_body(std::string_view body);

}  // namespace capsweep::llm

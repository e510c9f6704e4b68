#pragma once
// `capsweep lengths FILE`: the token lengths of a dataset file (JSONL or ShareGPT, counted as
// capsweepd counts them) or of a CSV of token counts from a log, summarised and fitted as
// ready `prompt_tokens` / `output_tokens` blocks of a job's workload. Pure: text in, JSON out.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace capsweep::cli {

// The prompt and output lengths a file holds. A file whose first non-blank character is '['
// or '{' is a dataset (ShareGPT or JSONL); anything else a CSV: one count a line, or columns
// with an optional header naming them (a name containing "prompt" or "input" is the prompt
// column, "output" or "completion" the output column; without a header the first column is
// the prompt, the second the output). Errors name the line.
struct FileLengths {
  std::vector<std::uint32_t> prompt, output;
};
Result<FileLengths> read_lengths(std::string_view text);

// {"prompt_tokens": {"items", "p50", "p95", "max", "lognormal": {...}, "empirical": {...}},
//  "output_tokens": {...}}: one entry for each kind of length the file has.
nlohmann::json lengths_summary(const FileLengths& lengths, std::size_t bins = 16);

// The summary as people read it: a line of figures a length, then the two blocks to paste.
std::string lengths_text(const nlohmann::json& summary);

}  // namespace capsweep::cli

#pragma once
// Prompt datasets: the file formats capsweep reads (JSONL items, ShareGPT conversations and
// timestamped JSONL traces), checked item by item with errors naming the line or entry and the field,
// their length statistics, and the content address (sha256) a stored dataset is known by.
// Pure apart from hashing: the caller reads and stores the bytes.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace capsweep::llm {

enum class DatasetFormat { jsonl, sharegpt, trace };
std::string_view to_string(DatasetFormat f) noexcept;
std::optional<DatasetFormat> parse_dataset_format(std::string_view s) noexcept;
// The format a file's first non-blank byte suggests: '[' ShareGPT, anything else JSONL.
DatasetFormat sniff_dataset_format(std::string_view text) noexcept;

struct DatasetEntry {
  std::string prompt;                          // the text (a messages item: its contents joined by blank lines)
  std::string messages;                        // a messages item: the chat messages as a JSON array text; "" otherwise
  std::optional<std::uint32_t> max_tokens;     // the request's cap, when the item gives one
  std::optional<std::uint32_t> output_tokens;  // the reference answer's length, when given
  std::uint32_t reference_output_words = 0;    // ShareGPT: words of the answer turn
  // What regression quality checks read: {"response_format", "tools", "tool_choice",
  // "expect"} as a JSON object text; "" when the item has none of them.
  std::string quality;
  // A trace row (format trace): when it arrived (ms on the trace's clock), its prompt's length
  // in tokens and the ids of the blocks of shared text it starts with (Mooncake-style
  // hash_ids: rows naming one id share that block's text). Its prompt is made from these.
  std::optional<double> timestamp_ms;
  std::uint32_t input_length = 0;
  std::vector<std::uint64_t> hash_ids;
};

// The lengths of a dataset as the engine counts them before calibration: whitespace words,
// one token each (a job scales them by the target's calibrated tokens per word).
struct DatasetStats {
  std::uint64_t items = 0;
  struct Lengths {
    std::uint64_t count = 0;  // items with this length
    double p50 = 0, p95 = 0, max = 0;
  };
  Lengths prompt_tokens;
  Lengths output_tokens;  // items that give an output length (output_tokens, max_tokens, answer)
};

struct Dataset {
  std::vector<DatasetEntry> entries;
  DatasetStats stats;
};

// Items longer than this (prompt words, output tokens) are refused at upload.
inline constexpr std::uint32_t kMaxDatasetTokens = 1'000'000;

// JSONL: one object a line with "prompt" (string) or "messages" ([{"role", "content"}]),
// optional "output_tokens", "max_tokens" (integers in [1, 1000000]), "response_format"
// (object), "tools" (array of objects), "tool_choice" (string or object) and "expect"
// (object); other keys are ignored. Blank lines are skipped. Errors name the 1-based line
// and the field: field "line 3: /messages/0/content".
Result<std::vector<DatasetEntry>> parse_jsonl(std::string_view text);
// A trace, JSONL: one row a line, {"timestamp": ms (a number >= 0, never earlier than the row
// before), "input_length", "output_length" (integers in [1, 1000000]), "hash_ids" (optional: an
// array of at most 100000 integers in [0, 2^53])}; other keys are ignored. Errors name the
// line and the field, as parse_jsonl's.
Result<std::vector<DatasetEntry>> parse_trace(std::string_view text);
// ShareGPT JSON: an array of {"conversations": [{"from", "value"}, ...]}; the first turn is
// the prompt, the second's word count the answer's length. Entries with fewer than two turns
// are skipped. Read entry by entry (the whole document is never held as a tree). Errors name
// the entry: field "/12/conversations/1/value".
Result<std::vector<DatasetEntry>> parse_sharegpt(std::string_view text);
// Checks every item and returns the statistics alone, keeping no entry (an upload's
// check: the file's bytes are the only copy held).
Result<DatasetStats> scan_dataset(DatasetFormat format, std::string_view text);
// Either format, with the statistics.
Result<Dataset> parse_dataset(DatasetFormat format, std::string_view text);
DatasetStats dataset_stats(const std::vector<DatasetEntry>& entries);
// Each item's prompt length (words), or each output length an item gives (output_tokens,
// else max_tokens, else the reference answer's words; items with none are left out): the
// counts dataset_stats and `capsweep lengths` summarise.
enum class DatasetLength { prompt, output };
std::vector<std::uint32_t> dataset_lengths(const std::vector<DatasetEntry>& entries, DatasetLength which);

// Lowercase hex SHA-256 of the bytes.
std::string sha256_hex(std::string_view bytes);
// The id a dataset with that SHA-256 is stored under: "ds-" and the hash's first 16 digits.
std::string dataset_id(std::string_view sha256);
// Whether `id` has the form dataset_id() gives.
bool is_dataset_id(std::string_view id) noexcept;

}  // namespace capsweep::llm

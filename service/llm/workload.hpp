#pragma once
// What each request of a step asks for: prompts synthesised to a token count (calibrated
// against the target's tokenizer), or taken from a dataset; output lengths from a
// distribution. Pure: the caller does the I/O (calibration request, reading files).

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/lengths.hpp"
#include "core/random.hpp"

namespace capsweep::llm {

// One request's content.
struct WorkItem {
  std::string prompt;
  std::uint32_t input_tokens = 0;  // expected (synthesised: the target; dataset: estimated)
  std::uint32_t max_tokens = 1;
};

struct DatasetEntry {
  std::string prompt;
  std::optional<std::uint32_t> max_tokens;   // from the dataset when it says
  std::uint32_t reference_output_words = 0;  // ShareGPT: words of the answer turn
};

// ShareGPT JSON: an array of {"conversations": [{"from", "value"}, ...]}; the first turn is
// the prompt, the second's length (in words, converted with the calibration) the max_tokens.
// Entries with fewer than two turns are skipped. Errors name the entry ("/12/conversations").
Result<std::vector<DatasetEntry>> parse_sharegpt(std::string_view text);
// JSONL: one {"prompt": "...", "max_tokens": N} per line; errors name the 1-based line.
Result<std::vector<DatasetEntry>> parse_jsonl(std::string_view text);

// Builds prompts of a requested token count from a fixed word list, knowing how many tokens
// the target's tokenizer makes of one word of that list.
class PromptSynth {
 public:
  // tokens_per_word: calibrated ratio (> 0); shared_prefix_tokens: a prefix common to every
  // prompt (0 = none: prompts are distinct so no accidental prefix-cache hits).
  PromptSynth(double tokens_per_word, std::uint32_t shared_prefix_tokens = 0, std::uint64_t seed = 0);

  // A prompt of about `tokens` tokens; `index` makes it distinct from every other index.
  std::string make(std::uint32_t tokens, std::uint64_t index) const;
  double tokens_per_word() const noexcept { return tokens_per_word_; }

  // The text used to calibrate: `words` words of the list, space-separated.
  static std::string calibration_text(std::uint32_t words);

 private:
  double tokens_per_word_;
  std::string prefix_;
  std::uint32_t prefix_tokens_ = 0;
  std::uint64_t seed_;
};

// The workload part of a job spec: {"prompt_tokens": dist, "output_tokens": dist, "seed",
// "shared_prefix_tokens"} (plus "dataset" handled by the caller).
struct WorkloadSpec {
  LengthDist prompt_tokens = LengthDist::fixed(200);
  LengthDist output_tokens = LengthDist::fixed(64);
  std::uint64_t seed = 0;
  std::uint32_t shared_prefix_tokens = 0;
};
Result<WorkloadSpec> parse_workload(const nlohmann::json& j, const std::string& field = "/workload");

// Produces the i-th request of a step, deterministically from the seed.
class Workload {
 public:
  Workload(WorkloadSpec spec, PromptSynth synth, std::vector<DatasetEntry> dataset = {});
  WorkItem item(std::uint64_t index) const;
  const PromptSynth& synth() const noexcept { return synth_; }

 private:
  WorkloadSpec spec_;
  PromptSynth synth_;
  std::vector<DatasetEntry> dataset_;
};

}  // namespace capsweep::llm

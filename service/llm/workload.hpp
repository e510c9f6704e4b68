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
#include "core/time.hpp"
#include "llm/dataset.hpp"

namespace capsweep::llm {

// One request's content.
struct WorkItem {
  std::string prompt;
  std::string messages;            // a dataset's chat messages (JSON array text); "" = one user turn of `prompt`
  std::uint32_t input_tokens = 0;  // expected (synthesised: the target; dataset: estimated)
  std::uint32_t max_tokens = 1;
  // How this request's user gives up (workload.abandon), drawn from the seed and the index.
  std::optional<Nanos> abandon_without_first_token;  // from its scheduled time
  std::uint32_t abandon_after_tokens = 0;            // 0: reads to the end
};

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

// A job's use of a stored dataset: {"id", "sha256" (filled in at submit; a pin when the
// caller gives it), "order": "sequential" | "shuffled", "output_tokens": "from_dataset" | a
// length distribution}.
struct DatasetRef {
  std::string id;
  std::string sha256;
  bool shuffled = false;
  bool output_from_dataset = true;  // false: the workload's output_tokens distribution
};

// The workload part of a job spec: {"prompt_tokens": dist, "output_tokens": dist, "seed",
// "shared_prefix_tokens", "dataset"}.
// Users who give up as real ones do: after `no_first_token` without a first token, and a
// `fraction` of the streams after `after_tokens` tokens (each request drawn from the seed).
struct AbandonSpec {
  std::optional<Nanos> no_first_token;
  std::uint32_t after_tokens = 0;  // 0: no stream is cut after a number of tokens
  double fraction = 1.0;
};

struct WorkloadSpec {
  LengthDist prompt_tokens = LengthDist::fixed(200);
  LengthDist output_tokens = LengthDist::fixed(64);
  std::uint64_t seed = 0;
  std::uint32_t shared_prefix_tokens = 0;
  std::optional<DatasetRef> dataset;
  std::optional<AbandonSpec> abandon;
};
// {"no_first_token_s": T, "after_tokens": k, "fraction": f}: at least one of the first two;
// fraction (0, 1], default 1, only with after_tokens. Errors name the field.
Result<AbandonSpec> parse_abandon(const nlohmann::json& j, const std::string& field);
Result<WorkloadSpec> parse_workload(const nlohmann::json& j, const std::string& field = "/workload");
// What a workload object as the caller wrote it (before defaults are filled in) may not
// combine with a dataset: prompt lengths or a shared prefix (the dataset gives the prompts),
// output lengths given twice. nullopt when it is fine.
std::optional<Error> check_dataset_workload(const nlohmann::json& j, const std::string& field = "/workload");

// Produces the i-th request of a step, deterministically from the seed. With a dataset, item
// i is entry i mod n (sequential) or entry perm[i mod n] of one permutation drawn from the
// seed (shuffled); its output length comes from the entry (output_tokens, else max_tokens,
// else the answer's words times the calibration) unless the spec gives a distribution, or
// the entry has none.
class Workload {
 public:
  Workload(WorkloadSpec spec, PromptSynth synth, std::vector<DatasetEntry> dataset = {});
  // The dataset entry item `index` uses (dataset workloads only).
  std::size_t entry_of(std::uint64_t index) const;
  WorkItem item(std::uint64_t index) const;
  const PromptSynth& synth() const noexcept { return synth_; }

 private:
  WorkloadSpec spec_;
  PromptSynth synth_;
  std::vector<DatasetEntry> dataset_;
  std::vector<std::uint32_t> order_;  // shuffled: the permutation; empty: sequential
};

}  // namespace capsweep::llm

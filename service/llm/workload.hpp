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
#include "llm/api_table.hpp"
#include "llm/dataset.hpp"
#include "llm/session.hpp"

namespace capsweep::llm {

// One request's content.
struct WorkItem {
  std::string prompt;
  std::string messages;             // a dataset's chat messages (JSON array text); "" = one user turn of `prompt`
  std::vector<std::string> inputs;  // its items (embeddings' inputs, rerank's documents); empty for none
  std::uint32_t input_tokens = 0;   // expected (synthesised: the target; dataset: estimated)
  std::uint32_t max_tokens = 1;
  // How this request's user gives up (workload.abandon), drawn from the seed and the index.
  std::optional<Nanos> abandon_without_first_token;  // from its scheduled time
  std::uint32_t abandon_after_tokens = 0;            // 0: reads to the end
};

// What a step does about the target's prefix cache: take it as it finds it (prompts fixed by
// the seed, so an earlier run of the same spec may have left them cached), `cold` (every
// prompt salted per step and job: nothing of it can be cached before the step), or `warm`
// (salted as cold, then one request per prefix before the step, unmeasured).
enum class PrefixCache { as_found, cold, warm };
std::string_view to_string(PrefixCache c) noexcept;

// The salt of one step's prompts under a cold or warm cache: a pure function of the job's id
// and the step's request index base, never 0, the same on every platform.
std::uint64_t prompt_salt(std::string_view job_id, std::uint64_t request_index_base) noexcept;

// Shared prefixes (workload.prefix): `count` distinct prefixes, request i carrying prefix
// i mod count, of `tokens` tokens or of `ratio` of its own prompt (the leading part of one
// text per prefix, so requests of a prefix share the shorter one's length).
struct PrefixSpec {
  std::uint32_t tokens = 0;
  double ratio = 0;  // > 0: a share of each prompt instead of `tokens`
  std::uint32_t count = 1;
  PrefixCache cache = PrefixCache::as_found;
  bool any() const noexcept { return tokens > 0 || ratio > 0; }
};

// Builds prompts of a requested token count from a fixed word list, knowing how many tokens
// the target's tokenizer makes of one word of that list.
class PromptSynth {
 public:
  // tokens_per_word: calibrated ratio (> 0); shared_prefix_tokens: a prefix common to every
  // prompt (0 = none: prompts are distinct so no accidental prefix-cache hits).
  PromptSynth(double tokens_per_word, std::uint32_t shared_prefix_tokens = 0, std::uint64_t seed = 0);
  // The prompts share `prefix`'s prefixes.
  PromptSynth(double tokens_per_word, const PrefixSpec& prefix, std::uint64_t seed);

  // A prompt of about `tokens` tokens; `index` makes it distinct from every other index, and
  // a non-zero `salt` from every prompt of another salt (its prefix too).
  std::string make(std::uint32_t tokens, std::uint64_t index, std::uint64_t salt = 0) const;
  // A trace row's prompt of `tokens` tokens: the text of each block id in turn (`block_tokens`
  // each, the same text wherever the id recurs; the last cut where the prompt ends), then text
  // of this index's own for what the blocks leave.
  std::string make_from_blocks(const std::vector<std::uint64_t>& block_ids, std::uint32_t block_tokens,
                               std::uint32_t tokens, std::uint64_t index, std::uint64_t salt = 0) const;
  // Prefix k of `salt` (k < count), as long as the longest prompt of up to `max_prompt_tokens`
  // carries it: what a warm-up sends so that the target caches it.
  std::string prefix_text(std::uint32_t k, std::uint32_t max_prompt_tokens, std::uint64_t salt = 0) const;
  const PrefixSpec& prefix() const noexcept { return prefix_; }
  double tokens_per_word() const noexcept { return tokens_per_word_; }

  // The text used to calibrate: `words` words of the list, space-separated.
  static std::string calibration_text(std::uint32_t words);

 private:
  std::uint32_t prefix_tokens_for(std::uint32_t prompt_tokens) const;
  void append_prefix(std::string& out, std::uint64_t k, std::uint32_t tokens, std::uint64_t salt) const;
  double tokens_per_word_;
  PrefixSpec prefix_;
  std::uint64_t seed_;
};

// A job's use of a stored dataset: {"id", "sha256" (filled in at submit; a pin when the
// caller gives it), "order": "sequential" | "shuffled", "output_tokens": "from_dataset" | a
// length distribution}.
struct DatasetRef {
  std::string id;
  std::string sha256;
  bool shuffled = false;
  bool output_from_dataset = true;   // false: the workload's output_tokens distribution
  std::uint32_t block_tokens = 512;  // a trace's hash_ids: tokens of shared text each names
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

// Requests of several items (an API row's items_key: embeddings' inputs_per_request, rerank's
// documents_per_request): how many, each of prompt_tokens, and whether the prompt goes with
// them as a query (its tokens counted once per item, as a cross-encoder reads each pair).
struct ItemsSpec {
  std::string key;  // "inputs_per_request"
  LengthDist count = LengthDist::fixed(1);
  bool query = false;
};
// At most this many items per request, and item tokens (every item's prompt_tokens at its
// largest) per request.
inline constexpr std::uint32_t kMaxItemsPerRequest = 2048;
inline constexpr std::uint64_t kMaxItemTokensPerRequest = 1u << 20;

struct WorkloadSpec {
  LengthDist prompt_tokens = LengthDist::fixed(200);
  LengthDist output_tokens = LengthDist::fixed(64);
  std::uint64_t seed = 0;
  std::uint32_t shared_prefix_tokens = 0;  // the short form of prefix {"tokens": n, "count": 1}
  PrefixSpec prefix;
  std::optional<DatasetRef> dataset;
  std::optional<AbandonSpec> abandon;
  std::optional<SessionSpec> sessions;  // multi-turn sessions (llm/session.hpp)
  std::optional<ItemsSpec> items;       // requests of several items (ItemsSpec)
};
// A workload for a target of `api`: an API whose requests carry items gets one item per
// request where the spec does not say how many. An error names the items' field when the
// spec gives them for an API that takes none or another kind (its own key).
Result<WorkloadSpec> fit_to_api(WorkloadSpec w, Api api, const std::string& field = "/workload");
// {"no_first_token_s": T, "after_tokens": k, "fraction": f}: at least one of the first two;
// fraction (0, 1], default 1, only with after_tokens. Errors name the field.
Result<AbandonSpec> parse_abandon(const nlohmann::json& j, const std::string& field);
// {"tokens": n | "ratio": r, "count": k (1), "cache": "as_found" | "cold" | "warm"}: exactly one
// of tokens and ratio (ratio in (0, 1)), count in [1, 100000]. Errors name the field.
Result<PrefixSpec> parse_prefix(const nlohmann::json& j, const std::string& field);
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
  // The dataset entry item `index` uses (dataset workloads only). A trace's row is the
  // index within its step (its low 32 bits) modulo the rows: the replay's request k is row k.
  std::size_t entry_of(std::uint64_t index) const;
  // A trace workload: its rows' arrivals from the first row's (empty for any other workload).
  std::vector<Nanos> trace_offsets() const;
  // `salt`: the step's prefix-cache salt (0: none; see PrefixCache).
  WorkItem item(std::uint64_t index, std::uint64_t salt = 0) const;
  // What a warm prefix cache needs sent before a step of `salt`: each prefix once, as long as
  // the longest prompt carries it. Empty without shared prefixes.
  std::vector<std::string> warm_prompts(std::uint64_t salt) const;
  // Session `id`'s script (workload.sessions; llm/session.cpp): its turns, their lengths, think
  // times and reference answers, drawn from the seed and the id. With a dataset, the id's
  // item: its chat messages (a conversation), or its prompt as a session of one turn.
  SessionScript session(std::uint64_t id, std::uint64_t salt = 0) const;
  const WorkloadSpec& spec() const noexcept { return spec_; }
  const PromptSynth& synth() const noexcept { return synth_; }

 private:
  WorkloadSpec spec_;
  PromptSynth synth_;
  std::vector<DatasetEntry> dataset_;
  std::vector<std::uint32_t> order_;  // shuffled: the permutation; empty: sequential
  // Item `index`'s items (spec_.items), made from the seed; its input tokens become theirs.
  void add_items(WorkItem& w, std::uint64_t index, std::uint64_t salt) const;
};

}  // namespace capsweep::llm

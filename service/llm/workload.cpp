#include "llm/workload.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/fields.hpp"
#include "core/numeric.hpp"
#include "core/text.hpp"

namespace capsweep::llm {
namespace {

// Common short English words: one token each in the usual BPE vocabularies (the calibration
// measures the real ratio anyway).
constexpr std::array<std::string_view, 128> kWords{
    "time",   "year",   "people", "way",     "day",     "man",       "thing",    "woman",   "life",       "child",
    "world",  "school", "state",  "family",  "student", "group",     "country",  "problem", "hand",       "part",
    "place",  "case",   "week",   "company", "system",  "program",   "question", "work",    "government", "number",
    "night",  "point",  "home",   "water",   "room",    "mother",    "area",     "money",   "story",      "fact",
    "month",  "lot",    "right",  "study",   "book",    "eye",       "job",      "word",    "business",   "issue",
    "side",   "kind",   "head",   "house",   "service", "friend",    "father",   "power",   "hour",       "game",
    "line",   "end",    "member", "law",     "car",     "city",      "name",     "team",    "minute",     "idea",
    "kid",    "body",   "back",   "parent",  "face",    "others",    "level",    "office",  "door",       "health",
    "person", "art",    "war",    "history", "party",   "result",    "change",   "morning", "reason",     "research",
    "girl",   "guy",    "moment", "air",     "teacher", "force",     "order",    "good",    "new",        "first",
    "last",   "long",   "great",  "little",  "own",     "other",     "old",      "big",     "high",       "different",
    "small",  "large",  "next",   "early",   "young",   "important", "few",      "public",  "bad",        "same",
    "able",   "make",   "know",   "take",    "see",     "come",      "think",    "look"};

void append_words(std::string& out, std::uint32_t n, Rng& rng) {
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!out.empty()) out.push_back(' ');
    out.append(kWords[rng.uniform_int(0, kWords.size() - 1)]);
  }
}

// The longest prompt a warm-up's prefixes are made for (a ratio of an unbounded length is refused).
constexpr std::uint32_t kMaxWarmPromptTokens = 1'000'000;

std::uint32_t words_for(double tokens, double tokens_per_word) {
  return saturate<std::uint32_t>(std::max(0.0, std::round(tokens / tokens_per_word)));
}

Result<DatasetRef> parse_dataset_ref(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "must be an object {\"id\": \"ds-...\"}");
  DatasetRef d;
  for (const auto& [key, value] : j.items()) {
    const std::string f = field + "/" + key;
    if (key == "id") {
      if (!value.is_string() || !is_dataset_id(value.get_ref<const std::string&>())) {
        return invalid(f, "must be a dataset id (\"ds-\" and 16 hex digits) from POST /v1/datasets");
      }
      d.id = value.get<std::string>();
    } else if (key == "sha256") {
      const bool hex = value.is_string() && value.get_ref<const std::string&>().size() == 64 &&
                       value.get_ref<const std::string&>().find_first_not_of("0123456789abcdef") == std::string::npos;
      if (!hex) return invalid(f, "must be 64 lowercase hex digits");
      d.sha256 = value.get<std::string>();
    } else if (key == "order") {
      if (value != "sequential" && value != "shuffled") return invalid(f, "must be \"sequential\" or \"shuffled\"");
      d.shuffled = value == "shuffled";
    } else if (key == "block_tokens") {
      auto n = fields::integer<std::uint32_t>(j, "block_tokens", field, std::nullopt, 1, 1'000'000);
      if (!n) return n.error();
      d.block_tokens = *n;
    } else if (key == "output_tokens") {
      if (value == "from_dataset") continue;
      if (!value.is_object()) return invalid(f, "must be \"from_dataset\" or a length distribution");
      auto dist = parse_length_dist(value, f);
      if (!dist) return dist.error();
      d.output_from_dataset = false;
    } else {
      return invalid(f, "unknown dataset field (expected id, sha256, order, output_tokens or block_tokens)");
    }
  }
  if (d.id.empty()) return invalid(field + "/id", "is required");
  if (!d.sha256.empty() && dataset_id(d.sha256) != d.id) return invalid(field + "/sha256", "does not match the id");
  return d;
}

}  // namespace

std::string_view to_string(PrefixCache c) noexcept {
  switch (c) {
    case PrefixCache::cold:
      return "cold";
    case PrefixCache::warm:
      return "warm";
    case PrefixCache::as_found:
      break;
  }
  return "as_found";
}

std::uint64_t prompt_salt(std::string_view job_id, std::uint64_t request_index_base) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a of the id
  for (const char c : job_id) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  const std::uint64_t salt = splitmix64(h ^ splitmix64(request_index_base));
  return salt == 0 ? 1 : salt;
}

PromptSynth::PromptSynth(double tokens_per_word, std::uint32_t shared_prefix_tokens, std::uint64_t seed)
    : PromptSynth(tokens_per_word, PrefixSpec{.tokens = shared_prefix_tokens}, seed) {}

PromptSynth::PromptSynth(double tokens_per_word, const PrefixSpec& prefix, std::uint64_t seed)
    : tokens_per_word_(tokens_per_word > 0 && std::isfinite(tokens_per_word) ? tokens_per_word : 1.0),
      prefix_(prefix),
      seed_(seed) {
  prefix_.count = std::max<std::uint32_t>(1, prefix_.count);
}

std::uint32_t PromptSynth::prefix_tokens_for(std::uint32_t prompt_tokens) const {
  if (prefix_.tokens > 0) return prefix_.tokens;
  return saturate<std::uint32_t>(std::round(prefix_.ratio * static_cast<double>(prompt_tokens)));
}

// Prefix k of `salt` is the leading `tokens` of one word stream of its own: prefixes of one k
// and salt share their leading words whatever their lengths.
void PromptSynth::append_prefix(std::string& out, std::uint64_t k, std::uint32_t tokens, std::uint64_t salt) const {
  const std::uint64_t key = k == 0 && salt == 0 ? 0 : splitmix64(splitmix64(k + 1) ^ salt);
  Rng rng(splitmix64(seed_ ^ 0x5eed ^ key));
  append_words(out, std::max<std::uint32_t>(1, words_for(tokens, tokens_per_word_)), rng);
}

std::string PromptSynth::make(std::uint32_t tokens, std::uint64_t index, std::uint64_t salt) const {
  std::string out;
  const std::uint32_t prefix_tokens = prefix_.any() ? prefix_tokens_for(tokens) : 0;
  if (prefix_tokens > 0) append_prefix(out, index % prefix_.count, prefix_tokens, salt);
  Rng rng(splitmix64(seed_ ^ splitmix64(index + 1) ^ salt));
  const double rest = static_cast<double>(tokens) - static_cast<double>(prefix_tokens);
  append_words(out, std::max<std::uint32_t>(1, words_for(rest, tokens_per_word_)), rng);
  return out;
}

std::string PromptSynth::make_from_blocks(const std::vector<std::uint64_t>& block_ids, std::uint32_t block_tokens,
                                          std::uint32_t tokens, std::uint64_t index, std::uint64_t salt) const {
  std::string out;
  std::uint32_t left = tokens;
  for (const std::uint64_t id : block_ids) {
    if (left == 0) break;
    const std::uint32_t n = std::min(block_tokens, left);
    Rng rng(splitmix64(seed_ ^ 0xb10c ^ splitmix64(splitmix64(id + 1) ^ salt)));
    append_words(out, std::max<std::uint32_t>(1, words_for(n, tokens_per_word_)), rng);
    left -= n;
  }
  if (left > 0 || out.empty()) {
    Rng rng(splitmix64(seed_ ^ splitmix64(index + 1) ^ salt));
    append_words(out, std::max<std::uint32_t>(1, words_for(left, tokens_per_word_)), rng);
  }
  return out;
}

std::string PromptSynth::prefix_text(std::uint32_t k, std::uint32_t max_prompt_tokens, std::uint64_t salt) const {
  std::string out;
  if (prefix_.any()) append_prefix(out, k, prefix_tokens_for(max_prompt_tokens), salt);
  return out;
}

std::string PromptSynth::calibration_text(std::uint32_t words) {
  std::string out;
  Rng rng(12345);
  append_words(out, words, rng);
  return out;
}

Result<AbandonSpec> parse_abandon(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "must be an object such as {\"no_first_token_s\": 10}");
  AbandonSpec a;
  bool fraction_given = false;
  for (const auto& [key, value] : j.items()) {
    const std::string f = field + "/" + key;
    if (key == "no_first_token_s") {
      if (!value.is_number() || !(value.get<double>() > 0) || value.get<double>() > 3600) {
        return invalid(f, "must be a number of seconds in (0, 3600]");
      }
      a.no_first_token = Nanos(static_cast<Nanos::rep>(std::llround(value.get<double>() * 1e9)));
    } else if (key == "after_tokens") {
      if (!value.is_number_integer() || value.get<std::int64_t>() < 1 || value.get<std::int64_t>() > 1'000'000) {
        return invalid(f, "must be an integer number of tokens in [1, 1000000]");
      }
      a.after_tokens = value.get<std::uint32_t>();
    } else if (key == "fraction") {
      if (!value.is_number() || !(value.get<double>() > 0) || value.get<double>() > 1) {
        return invalid(f, "must be a share of the streams in (0, 1]");
      }
      a.fraction = value.get<double>();
      fraction_given = true;
    } else {
      return invalid(f, "unknown abandon field (expected no_first_token_s, after_tokens or fraction)");
    }
  }
  if (!a.no_first_token && a.after_tokens == 0) {
    return invalid(field, "give no_first_token_s, after_tokens or both");
  }
  if (fraction_given && a.after_tokens == 0) return invalid(field + "/fraction", "fraction needs after_tokens");
  return a;
}

Result<PrefixSpec> parse_prefix(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "must be an object such as {\"tokens\": 800, \"count\": 4}");
  PrefixSpec p;
  for (const auto& [key, value] : j.items()) {
    const std::string f = field + "/" + key;
    if (key == "tokens") {
      auto n = fields::integer<std::uint32_t>(j, "tokens", field, std::nullopt, 1, 1'000'000);
      if (!n) return n.error();
      p.tokens = *n;
    } else if (key == "ratio") {
      if (!value.is_number() || !(value.get<double>() > 0) || !(value.get<double>() < 1)) {
        return invalid(f, "must be a share of each prompt in (0, 1)");
      }
      p.ratio = value.get<double>();
    } else if (key == "count") {
      auto n = fields::integer<std::uint32_t>(j, "count", field, std::nullopt, 1, 100'000);
      if (!n) return n.error();
      p.count = *n;
    } else if (key == "cache") {
      if (value == "cold") {
        p.cache = PrefixCache::cold;
      } else if (value == "warm") {
        p.cache = PrefixCache::warm;
      } else if (value != "as_found") {
        return invalid(f, "must be \"cold\", \"warm\" or \"as_found\"");
      }
    } else {
      return invalid(f, "unknown prefix field (expected tokens, ratio, count or cache)");
    }
  }
  if (p.tokens > 0 && p.ratio > 0) return invalid(field + "/ratio", "give tokens or ratio, not both");
  if (!p.any() && p.cache != PrefixCache::cold) {
    return invalid(field + "/tokens", "give tokens or ratio (or only \"cache\": \"cold\")");
  }
  return p;
}

namespace {

// A workload's prefix against its prompts: shorter than the longest prompt (a prompt carries
// its prefix and at least one token of its own, so a longer prefix would silently lengthen
// every prompt past what prompt_tokens asks), and a warm ratio's longest prefix known.
std::optional<Error> check_prefix_fits(const WorkloadSpec& w, const std::string& field) {
  if (w.prefix.tokens > 0 && !w.dataset && w.prefix.tokens >= w.prompt_tokens.upper_bound()) {
    return invalid(field + (w.shared_prefix_tokens > 0 ? "/shared_prefix_tokens" : "/prefix/tokens"),
                   fmt::format("a prefix of {} tokens is not shorter than the longest prompt ({} tokens): a prompt "
                               "carries its prefix and text of its own",
                               w.prefix.tokens, w.prompt_tokens.upper_bound()));
  }
  if (w.prefix.cache == PrefixCache::warm && w.prefix.ratio > 0 &&
      w.prompt_tokens.upper_bound() > kMaxWarmPromptTokens) {
    return invalid(field + "/prefix/ratio",
                   "a warm cache with a ratio needs prompt_tokens with a max (to know the "
                   "longest prefix to warm)");
  }
  return std::nullopt;
}

// The API row whose requests' items `key` counts (inputs_per_request: embeddings'), or none.
const ApiRow* items_row(std::string_view key) {
  for (const std::string& name : api_names()) {
    const ApiRow& row = api_row(*parse_api(name));
    if (!row.items_key.empty() && row.items_key == key) return &row;
  }
  return nullptr;
}

// ", inputs_per_request or documents_per_request": the items keys of the API table.
std::string items_keys() {
  std::vector<std::string> keys;
  for (const std::string& name : api_names()) {
    const ApiRow& row = api_row(*parse_api(name));
    if (!row.items_key.empty()) keys.push_back(row.items_key);
  }
  std::string out;
  for (std::size_t i = 0; i < keys.size(); ++i) out += (i + 1 == keys.size() ? " or " : ", ") + keys[i];
  return out;
}

}  // namespace

Result<WorkloadSpec> fit_to_api(WorkloadSpec w, Api api, const std::string& field) {
  const ApiRow& row = api_row(api);
  if (w.items && w.items->key != row.items_key) {
    return invalid(field + "/" + w.items->key,
                   row.items_key.empty() ? fmt::format("the {} API sends no items per request", row.name)
                                         : fmt::format("the {} API counts its items as {}", row.name, row.items_key));
  }
  if (!row.items_key.empty() && !w.items) w.items = ItemsSpec{row.items_key, LengthDist::fixed(1), row.items_query};
  if (!w.items) return w;
  const std::uint64_t most = std::uint64_t{w.items->count.upper_bound()} * w.prompt_tokens.upper_bound();
  if (w.items->count.upper_bound() > kMaxItemsPerRequest || most > kMaxItemTokensPerRequest) {
    return invalid(field + "/" + w.items->key,
                   fmt::format("at most {} items and {} item tokens per request (prompt_tokens at its largest: {})",
                               kMaxItemsPerRequest, kMaxItemTokensPerRequest, w.prompt_tokens.upper_bound()));
  }
  if (w.dataset || w.sessions) {
    return invalid(field + (w.sessions ? "/sessions" : "/dataset"),
                   fmt::format("the {} API's requests are {} made from prompt_tokens: not a dataset's or sessions' "
                               "prompts",
                               row.name, row.items_key));
  }
  return w;
}

Result<WorkloadSpec> parse_workload(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "must be an object");
  WorkloadSpec w;
  for (const auto& [key, value] : j.items()) {
    const std::string f = field + "/" + key;
    if (key == "prompt_tokens" || key == "output_tokens") {
      auto d = parse_length_dist(value, f);
      if (!d) return d.error();
      (key == "prompt_tokens" ? w.prompt_tokens : w.output_tokens) = *d;
    } else if (key == "seed") {
      if (!value.is_number_unsigned()) return invalid(f, "must be a non-negative integer");
      w.seed = value.get<std::uint64_t>();
    } else if (key == "shared_prefix_tokens") {
      auto n = fields::integer<std::uint32_t>(j, "shared_prefix_tokens", field, std::nullopt, 0, 1'000'000);
      if (!n) return n.error();
      w.shared_prefix_tokens = *n;
    } else if (key == "dataset") {
      auto d = parse_dataset_ref(value, f);
      if (!d) return d.error();
      w.dataset = std::move(*d);
    } else if (key == "abandon") {
      auto a = parse_abandon(value, f);
      if (!a) return a.error();
      w.abandon = *a;
    } else if (key == "sessions") {
      auto ss = parse_sessions(value, f);
      if (!ss) return ss.error();
      w.sessions = std::move(*ss);
    } else if (key == "prefix") {
      auto p = parse_prefix(value, f);
      if (!p) return p.error();
      w.prefix = *p;
    } else if (const ApiRow* row = items_row(key)) {
      if (w.items) return invalid(f, fmt::format("a request's items are counted once: {} is given", w.items->key));
      auto d = parse_length_dist(value, f);
      if (!d) return d.error();
      w.items = ItemsSpec{row->items_key, *d, row->items_query};
    } else {
      return invalid(f, fmt::format("unknown workload field (expected prompt_tokens, output_tokens, seed, "
                                    "shared_prefix_tokens, prefix, dataset, abandon, sessions{})",
                                    items_keys()));
    }
  }
  if (w.shared_prefix_tokens > 0) {
    if (j.contains("prefix")) return invalid(field + "/prefix", "give shared_prefix_tokens or prefix, not both");
    w.prefix.tokens = w.shared_prefix_tokens;
  }
  if (auto bad = check_prefix_fits(w, field)) return *bad;
  if (w.dataset) {
    // With a dataset, a distribution of output lengths may sit in dataset.output_tokens.
    if (auto o = j.at("dataset").find("output_tokens"); o != j.at("dataset").end() && o->is_object()) {
      w.output_tokens = *parse_length_dist(*o, field + "/dataset/output_tokens");
    }
  }
  return w;
}

std::optional<Error> check_dataset_workload(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object() || !j.contains("dataset")) return std::nullopt;
  for (const char* key : {"prompt_tokens", "shared_prefix_tokens"}) {
    if (j.contains(key)) return invalid(field + "/" + key, "the dataset gives the prompts");
  }
  // A dataset's prompts are its own: of prefix, only the cache's state applies (to a trace's blocks).
  if (auto p = j.find("prefix"); p != j.end() && p->is_object()) {
    for (const char* key : {"tokens", "ratio", "count"}) {
      if (p->contains(key)) return invalid(field + "/prefix/" + key, "the dataset gives the prompts");
    }
  }
  // A dataset's conversations give each session its turns.
  if (auto ss = j.find("sessions"); ss != j.end() && ss->is_object() && ss->contains("turns")) {
    return invalid(field + "/sessions/turns", "the dataset's conversations give the turns");
  }
  const auto& d = j.at("dataset");
  if (j.contains("output_tokens") && d.is_object() && d.contains("output_tokens")) {
    return invalid(field + "/output_tokens", "give the output lengths once: here or in dataset.output_tokens");
  }
  return std::nullopt;
}

Workload::Workload(WorkloadSpec spec, PromptSynth synth, std::vector<DatasetEntry> dataset)
    : spec_(std::move(spec)), synth_(std::move(synth)), dataset_(std::move(dataset)) {
  if (spec_.dataset && spec_.dataset->shuffled && !dataset_.empty()) {
    order_.resize(dataset_.size());
    for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<std::uint32_t>(i);
    Rng rng(splitmix64(spec_.seed ^ 0x5f1e));
    for (std::size_t i = order_.size() - 1; i > 0; --i) std::swap(order_[i], order_[rng.uniform_int(0, i)]);
  }
}

std::size_t Workload::entry_of(std::uint64_t index) const {
  if (dataset_.front().timestamp_ms) return static_cast<std::size_t>((index & 0xffff'ffffull) % dataset_.size());
  const std::size_t at = static_cast<std::size_t>(index % dataset_.size());
  return order_.empty() ? at : order_[at];
}

std::vector<Nanos> Workload::trace_offsets() const {
  std::vector<Nanos> out;
  if (dataset_.empty() || !dataset_.front().timestamp_ms) return out;
  out.reserve(dataset_.size());
  const double first = *dataset_.front().timestamp_ms;
  for (const auto& d : dataset_)
    out.emplace_back(static_cast<Nanos::rep>(std::llround((d.timestamp_ms.value_or(first) - first) * 1e6)));
  return out;
}

std::vector<std::string> Workload::warm_prompts(std::uint64_t salt) const {
  std::vector<std::string> out;
  if (!dataset_.empty() || !spec_.prefix.any()) return out;
  const std::uint32_t longest = std::min(spec_.prompt_tokens.upper_bound(), kMaxWarmPromptTokens);
  for (std::uint32_t k = 0; k < spec_.prefix.count; ++k) out.push_back(synth_.prefix_text(k, longest, salt));
  return out;
}

WorkItem Workload::item(std::uint64_t index, std::uint64_t salt) const {
  Rng rng(splitmix64(spec_.seed ^ splitmix64(index ^ 0xabcdef)));
  WorkItem w;
  if (spec_.abandon) {
    // A draw of its own, so that the prompts and lengths do not change with abandonment.
    Rng abandon_rng(splitmix64(spec_.seed ^ splitmix64(index ^ 0xa8a4d0a)));
    w.abandon_without_first_token = spec_.abandon->no_first_token;
    if (spec_.abandon->after_tokens > 0 && abandon_rng.uniform01() < spec_.abandon->fraction) {
      w.abandon_after_tokens = spec_.abandon->after_tokens;
    }
  }
  if (!dataset_.empty()) {
    const auto& d = dataset_[entry_of(index)];
    if (d.timestamp_ms) {
      // A trace row: its lengths as recorded, its prompt made from its blocks.
      w.input_tokens = d.input_length;
      const bool from_dataset = !spec_.dataset || spec_.dataset->output_from_dataset;
      w.max_tokens = from_dataset ? d.output_tokens.value_or(1) : spec_.output_tokens.sample(rng);
      const std::uint32_t block = spec_.dataset ? spec_.dataset->block_tokens : 512;
      w.prompt = synth_.make_from_blocks(d.hash_ids, block, d.input_length, index, salt);
      return w;
    }
    w.prompt = d.prompt;
    w.messages = d.messages;
    w.input_tokens = std::max<std::uint32_t>(
        1, saturate<std::uint32_t>(std::round(count_words(d.prompt) * synth_.tokens_per_word())));
    const bool from_dataset = !spec_.dataset || spec_.dataset->output_from_dataset;
    if (!from_dataset)
      w.max_tokens = spec_.output_tokens.sample(rng);
    else if (d.output_tokens)
      w.max_tokens = *d.output_tokens;
    else if (d.max_tokens)
      w.max_tokens = *d.max_tokens;
    else if (d.reference_output_words)
      w.max_tokens = std::max<std::uint32_t>(
          1, saturate<std::uint32_t>(std::round(d.reference_output_words * synth_.tokens_per_word())));
    else
      w.max_tokens = spec_.output_tokens.sample(rng);
    return w;
  }
  w.input_tokens = spec_.prompt_tokens.sample(rng);
  w.max_tokens = spec_.output_tokens.sample(rng);
  w.prompt = synth_.make(w.input_tokens, index, salt);
  if (spec_.items) add_items(w, index, salt);
  return w;
}

void Workload::add_items(WorkItem& w, std::uint64_t index, std::uint64_t salt) const {
  // Draws of their own, so that the prompt and its lengths do not change with the items.
  Rng rng(splitmix64(spec_.seed ^ splitmix64(index ^ 0x17e35)));
  const std::uint32_t n = std::max<std::uint32_t>(1, spec_.items->count.sample(rng));
  const std::uint32_t query = spec_.items->query ? w.input_tokens : 0;
  std::uint64_t tokens = 0;
  w.inputs.reserve(n);
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::uint32_t t = spec_.prompt_tokens.sample(rng);
    w.inputs.push_back(synth_.make(t, index, salt ^ splitmix64(0x17e35 + k)));
    tokens += std::uint64_t{t} + query;
  }
  w.input_tokens = saturate<std::uint32_t>(static_cast<double>(tokens));
  w.max_tokens = 1;
}

}  // namespace capsweep::llm

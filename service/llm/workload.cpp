#include "llm/workload.hpp"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/fields.hpp"
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

std::uint64_t mix(std::uint64_t x) noexcept {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void append_words(std::string& out, std::uint32_t n, Rng& rng) {
  for (std::uint32_t i = 0; i < n; ++i) {
    if (!out.empty()) out.push_back(' ');
    out.append(kWords[rng.uniform_int(0, kWords.size() - 1)]);
  }
}

std::uint32_t words_for(double tokens, double tokens_per_word) {
  return static_cast<std::uint32_t>(std::max(0.0, std::round(tokens / tokens_per_word)));
}

}  // namespace

Result<std::vector<DatasetEntry>> parse_sharegpt(std::string_view text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded()) return Error{errc::parse_error, "the ShareGPT file is not valid JSON", ""};
  if (!j.is_array()) return Error{errc::parse_error, "a ShareGPT file is a JSON array of conversations", ""};
  std::vector<DatasetEntry> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string where = fmt::format("/{}/conversations", i);
    if (!e.is_object() || !e.contains("conversations") || !e["conversations"].is_array()) {
      return Error{errc::parse_error, fmt::format("entry {} has no 'conversations' array", i), where};
    }
    const auto& turns = e["conversations"];
    if (turns.size() < 2) continue;
    for (std::size_t t = 0; t < 2; ++t) {
      if (!turns[t].is_object() || !turns[t].contains("value") || !turns[t]["value"].is_string()) {
        return Error{errc::parse_error, fmt::format("entry {} turn {} has no string 'value'", i, t),
                     fmt::format("{}/{}/value", where, t)};
      }
    }
    DatasetEntry d;
    d.prompt = turns[0]["value"].get<std::string>();
    d.reference_output_words = count_words(turns[1]["value"].get_ref<const std::string&>());
    if (d.prompt.empty() || d.reference_output_words == 0) continue;
    out.push_back(std::move(d));
  }
  if (out.empty()) return Error{errc::parse_error, "the ShareGPT file has no usable conversation", ""};
  return out;
}

Result<std::vector<DatasetEntry>> parse_jsonl(std::string_view text) {
  std::vector<DatasetEntry> out;
  std::optional<Error> failure;
  for_each_line(text, [&](std::string_view line, std::size_t line_no) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    if (line.empty()) return true;
    auto fail = [&](const std::string& what) {
      failure = Error{errc::parse_error, fmt::format("JSONL line {}: {}", line_no, what), ""};
      return false;
    };
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) return fail("not valid JSON");
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string()) return fail("needs a string \"prompt\"");
    DatasetEntry d;
    d.prompt = j["prompt"].get<std::string>();
    if (d.prompt.empty()) return fail("the prompt is empty");
    if (auto m = j.find("max_tokens"); m != j.end()) {
      if (!m->is_number_integer() || m->get<std::int64_t>() < 1 || m->get<std::int64_t>() > 1'000'000) {
        return fail("\"max_tokens\" must be an integer in [1, 1000000]");
      }
      d.max_tokens = static_cast<std::uint32_t>(m->get<std::int64_t>());
    }
    out.push_back(std::move(d));
    return true;
  });
  if (failure) return *failure;
  if (out.empty()) return Error{errc::parse_error, "the JSONL file has no prompt", ""};
  return out;
}

PromptSynth::PromptSynth(double tokens_per_word, std::uint32_t shared_prefix_tokens, std::uint64_t seed)
    : tokens_per_word_(tokens_per_word > 0 && std::isfinite(tokens_per_word) ? tokens_per_word : 1.0), seed_(seed) {
  if (shared_prefix_tokens > 0) {
    Rng rng(mix(seed ^ 0x5eed));
    const std::uint32_t words = std::max<std::uint32_t>(1, words_for(shared_prefix_tokens, tokens_per_word_));
    append_words(prefix_, words, rng);
    prefix_tokens_ = shared_prefix_tokens;
  }
}

std::string PromptSynth::make(std::uint32_t tokens, std::uint64_t index) const {
  std::string out = prefix_;
  Rng rng(mix(seed_ ^ mix(index + 1)));
  const double rest = static_cast<double>(tokens) - static_cast<double>(prefix_tokens_);
  append_words(out, std::max<std::uint32_t>(1, words_for(rest, tokens_per_word_)), rng);
  return out;
}

std::string PromptSynth::calibration_text(std::uint32_t words) {
  std::string out;
  Rng rng(12345);
  append_words(out, words, rng);
  return out;
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
      continue;  // read by the caller
    } else {
      return invalid(f,
                     "unknown workload field (expected prompt_tokens, output_tokens, seed, "
                     "shared_prefix_tokens or dataset)");
    }
  }
  return w;
}

Workload::Workload(WorkloadSpec spec, PromptSynth synth, std::vector<DatasetEntry> dataset)
    : spec_(std::move(spec)), synth_(std::move(synth)), dataset_(std::move(dataset)) {}

WorkItem Workload::item(std::uint64_t index) const {
  Rng rng(mix(spec_.seed ^ mix(index ^ 0xabcdef)));
  WorkItem w;
  if (!dataset_.empty()) {
    const auto& d = dataset_[rng.uniform_int(0, dataset_.size() - 1)];
    w.prompt = d.prompt;
    w.input_tokens = std::max<std::uint32_t>(
        1, static_cast<std::uint32_t>(std::round(count_words(d.prompt) * synth_.tokens_per_word())));
    if (d.max_tokens)
      w.max_tokens = *d.max_tokens;
    else if (d.reference_output_words)
      w.max_tokens = std::max<std::uint32_t>(
          1, static_cast<std::uint32_t>(std::round(d.reference_output_words * synth_.tokens_per_word())));
    else
      w.max_tokens = spec_.output_tokens.sample(rng);
    return w;
  }
  w.input_tokens = spec_.prompt_tokens.sample(rng);
  w.max_tokens = spec_.output_tokens.sample(rng);
  w.prompt = synth_.make(w.input_tokens, index);
  return w;
}

}  // namespace capsweep::llm

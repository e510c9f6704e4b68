#include "llm/workload.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "core/text.hpp"

using namespace capsweep;
using namespace capsweep::llm;
using json = nlohmann::json;

namespace {
std::uint32_t words(const std::string& s) {
  return count_words(s);
}
}  // namespace

TEST_CASE("workload: synthesised prompts hit the token count through the calibration") {
  PromptSynth one(1.0);
  CHECK(words(one.make(200, 0)) == 200);
  PromptSynth bpe(1.3);  // a tokenizer making 1.3 tokens of each word
  const auto p = bpe.make(1300, 5);
  CHECK(words(p) * 1.3 == Approx(1300).epsilon(0.02));
  CHECK(words(bpe.make(1, 0)) == 1);  // never empty
}

TEST_CASE("workload: prompts are distinct, reproducible, and share a prefix only when asked") {
  PromptSynth s(1.0, 0, 42);
  CHECK(s.make(50, 1) == s.make(50, 1));
  CHECK(s.make(50, 1) != s.make(50, 2));
  CHECK(s.make(50, 1).substr(0, 30) != s.make(50, 2).substr(0, 30));
  PromptSynth shared(1.0, 20, 42);
  const auto a = shared.make(50, 1), b = shared.make(50, 2);
  CHECK(words(a) == 50);
  const auto prefix_end = [](const std::string& s) {
    std::size_t pos = 0;
    for (int i = 0; i < 20; ++i) pos = s.find(' ', pos) + 1;
    return pos;
  };
  CHECK(a.substr(0, prefix_end(a)) == b.substr(0, prefix_end(b)));
  CHECK(a != b);
}

TEST_CASE("workload: items follow the length distributions and the seed") {
  WorkloadSpec spec;
  spec.prompt_tokens = LengthDist::uniform(10, 20).value();
  spec.output_tokens = LengthDist::fixed(7);
  spec.seed = 3;
  Workload w(spec, PromptSynth(1.0));
  std::set<std::uint32_t> lengths;
  for (int i = 0; i < 200; ++i) {
    auto item = w.item(i);
    CHECK(item.max_tokens == 7);
    CHECK(item.input_tokens >= 10);
    CHECK(item.input_tokens <= 20);
    CHECK(words(item.prompt) == item.input_tokens);
    lengths.insert(item.input_tokens);
  }
  CHECK(lengths.size() == 11);
  CHECK(w.item(5).prompt == Workload(spec, PromptSynth(1.0)).item(5).prompt);
}

TEST_CASE("workload: the spec's workload object parses, and its errors name the field") {
  auto w = parse_workload(json::parse(R"({"prompt_tokens": {"dist": "fixed", "value": 200},
      "output_tokens": {"dist": "lognormal", "median": 100, "p95": 400}, "seed": 42, "shared_prefix_tokens": 64})"))
               .value();
  CHECK(w.prompt_tokens.nominal_mean() == 200);
  CHECK(w.seed == 42);
  CHECK(w.shared_prefix_tokens == 64);
  CHECK(parse_workload(json::parse(R"({"seed": -1})")).error().field == "/workload/seed");
  CHECK(parse_workload(json::parse(R"({"prompt_tokens": {"dist": "zipf"}})")).error().field ==
        "/workload/prompt_tokens/dist");
  CHECK(parse_workload(json::parse(R"({"prompt": 3})")).error().field == "/workload/prompt");
  CHECK(parse_workload(json::array()).error().field == "/workload");
}

TEST_CASE("workload: ShareGPT files give prompts and answer lengths") {
  auto d = parse_sharegpt(R"([
    {"id": "a", "conversations": [{"from": "human", "value": "what is a queue"}, {"from": "gpt", "value": "a line of waiting things"}]},
    {"id": "b", "conversations": [{"from": "human", "value": "only one turn"}]},
    {"id": "c", "conversations": [{"from": "human", "value": "x y"}, {"from": "gpt", "value": "z"}, {"from": "human", "value": "more"}]}
  ])")
               .value();
  REQUIRE(d.size() == 2);
  CHECK(d[0].prompt == "what is a queue");
  CHECK(d[0].reference_output_words == 5);
  CHECK(d[1].reference_output_words == 1);
  WorkloadSpec spec;
  Workload w(spec, PromptSynth(2.0), d);
  for (int i = 0; i < 20; ++i) {
    auto item = w.item(i);
    CHECK((item.max_tokens == 10 || item.max_tokens == 2));  // words x 2 tokens per word
    CHECK((item.input_tokens == 8 || item.input_tokens == 4));
  }
}

TEST_CASE("workload: malformed ShareGPT files are errors naming the entry") {
  CHECK(parse_sharegpt("{").error().code == errc::parse_error);
  CHECK(parse_sharegpt("{}").error().message.find("array") != std::string::npos);
  CHECK(parse_sharegpt(R"([{"x": 1}])").error().field == "/0/conversations");
  CHECK(parse_sharegpt(R"([{"conversations": [{"value": "a"}, {"from": "gpt"}]}])").error().field ==
        "/0/conversations/1/value");
  CHECK_FALSE(parse_sharegpt("[]").has_value());
}

TEST_CASE("workload: JSONL prompts parse, and errors name the line") {
  auto d = parse_jsonl("{\"prompt\": \"a b c\", \"max_tokens\": 9}\n\n{\"prompt\": \"d\"}\r\n").value();
  REQUIRE(d.size() == 2);
  CHECK(d[0].max_tokens == 9u);
  CHECK_FALSE(d[1].max_tokens.has_value());
  CHECK(parse_jsonl("{\"prompt\": \"ok\"}\n{bad\n").error().message.find("line 2") != std::string::npos);
  CHECK(parse_jsonl("{\"text\": \"x\"}\n").error().message.find("line 1") != std::string::npos);
  CHECK(parse_jsonl("{\"prompt\": \"x\", \"max_tokens\": 0}\n").error().message.find("max_tokens") !=
        std::string::npos);
  CHECK(parse_jsonl("{\"prompt\": \"\"}\n").error().message.find("empty") != std::string::npos);
  CHECK_FALSE(parse_jsonl("\n\n").has_value());
}

TEST_CASE("workload: abandon parses its fields, and every bad value names its field") {
  auto w = parse_workload(json{{"abandon", {{"no_first_token_s", 2.5}, {"after_tokens", 8}, {"fraction", 0.25}}}});
  REQUIRE(w.has_value());
  REQUIRE(w->abandon.has_value());
  CHECK(w->abandon->no_first_token == std::chrono::milliseconds(2500));
  CHECK(w->abandon->after_tokens == 8);
  CHECK(w->abandon->fraction == 0.25);
  auto only_wait = parse_workload(json{{"abandon", {{"no_first_token_s", 1}}}}).value();
  CHECK(only_wait.abandon->after_tokens == 0);
  CHECK(only_wait.abandon->fraction == 1.0);
  CHECK_FALSE(parse_workload(json::object()).value().abandon.has_value());
  const std::vector<std::pair<json, std::string>> bad{
      {json{{"no_first_token_s", 0}}, "/workload/abandon/no_first_token_s"},
      {json{{"no_first_token_s", "3"}}, "/workload/abandon/no_first_token_s"},
      {json{{"no_first_token_s", 4000}}, "/workload/abandon/no_first_token_s"},
      {json{{"after_tokens", 0}}, "/workload/abandon/after_tokens"},
      {json{{"after_tokens", 2.5}}, "/workload/abandon/after_tokens"},
      {json{{"after_tokens", 4}, {"fraction", 0}}, "/workload/abandon/fraction"},
      {json{{"after_tokens", 4}, {"fraction", 1.5}}, "/workload/abandon/fraction"},
      {json{{"no_first_token_s", 1}, {"fraction", 0.5}}, "/workload/abandon/fraction"},  // needs after_tokens
      {json{{"patience", 1}}, "/workload/abandon/patience"},
      {json::object(), "/workload/abandon"},
      {json(5), "/workload/abandon"},
  };
  for (const auto& [value, field] : bad) {
    INFO(value.dump());
    auto r = parse_workload(json{{"abandon", value}});
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
  }
}

TEST_CASE("workload: which streams are cut is drawn from the seed and the index, at the fraction asked") {
  auto spec = parse_workload(json{{"seed", 9u}, {"abandon", {{"after_tokens", 5}, {"fraction", 0.3}}}}).value();
  Workload w(spec, PromptSynth(1.0));
  Workload again(spec, PromptSynth(1.0));
  auto plain_spec = parse_workload(json{{"seed", 9u}}).value();
  Workload plain(plain_spec, PromptSynth(1.0));
  int cut = 0;
  for (std::uint64_t i = 0; i < 4000; ++i) {
    const auto item = w.item(i);
    CHECK(item.abandon_after_tokens == again.item(i).abandon_after_tokens);  // reproducible
    CHECK((item.abandon_after_tokens == 0 || item.abandon_after_tokens == 5));
    CHECK_FALSE(item.abandon_without_first_token.has_value());
    CHECK(item.prompt == plain.item(i).prompt);  // abandonment draws apart: the prompts stay
    CHECK(item.max_tokens == plain.item(i).max_tokens);
    cut += item.abandon_after_tokens > 0;
  }
  CHECK(cut == Approx(1200).margin(120));  // 0.3 of 4000, within ~4 standard deviations
  CHECK(plain.item(3).abandon_after_tokens == 0);
}

namespace {
// The first n words of a prompt.
std::string first_words(const std::string& s, int n) {
  std::size_t pos = 0;
  for (int i = 0; i < n && pos != std::string::npos; ++i) {
    pos = s.find(' ', pos);
    if (pos != std::string::npos) ++pos;
  }
  return pos == std::string::npos ? s : s.substr(0, pos);
}
}  // namespace

TEST_CASE("workload: prefix parses with its defaults, and its errors name the field") {
  auto w = parse_workload(json::parse(R"({"prompt_tokens": {"dist": "fixed", "value": 1000},
                                          "prefix": {"tokens": 800, "count": 20, "cache": "warm"}})"))
               .value();
  CHECK(w.prefix.tokens == 800);
  CHECK(w.prefix.count == 20);
  CHECK(w.prefix.cache == PrefixCache::warm);
  CHECK(parse_workload(json::parse(R"({"prefix": {"ratio": 0.5}})")).value().prefix.count == 1);
  CHECK(parse_workload(json::parse(R"({"prefix": {"cache": "cold"}})")).value().prefix.cache == PrefixCache::cold);
  // shared_prefix_tokens is the short form of one prefix.
  auto s = parse_workload(json::parse(R"({"shared_prefix_tokens": 64})")).value();
  CHECK(s.prefix.tokens == 64);
  CHECK(s.prefix.count == 1);

  const auto field = [](const char* text) { return parse_workload(json::parse(text)).error().field; };
  CHECK(field(R"({"prefix": 3})") == "/workload/prefix");
  CHECK(field(R"({"prefix": {"tokens": 0}})") == "/workload/prefix/tokens");
  CHECK(field(R"({"prefix": {"ratio": 1}})") == "/workload/prefix/ratio");
  CHECK(field(R"({"prefix": {"tokens": 8, "ratio": 0.5}})") == "/workload/prefix/ratio");
  CHECK(field(R"({"prefix": {"tokens": 8, "count": 0}})") == "/workload/prefix/count");
  CHECK(field(R"({"prefix": {"tokens": 8, "cache": "hot"}})") == "/workload/prefix/cache");
  CHECK(field(R"({"prefix": {"tokens": 8, "size": 2}})") == "/workload/prefix/size");
  CHECK(field(R"({"prefix": {"count": 4}})") == "/workload/prefix/tokens");
  CHECK(field(R"({"prefix": {"tokens": 8}, "shared_prefix_tokens": 8})") == "/workload/prefix");
  // A prefix no shorter than the longest prompt would lengthen every prompt past what it asks.
  CHECK(field(R"({"prompt_tokens": {"dist": "fixed", "value": 30}, "prefix": {"tokens": 40}})") ==
        "/workload/prefix/tokens");
  CHECK(field(R"({"prompt_tokens": {"dist": "uniform", "min": 10, "max": 40}, "prefix": {"tokens": 40}})") ==
        "/workload/prefix/tokens");
  CHECK(field(R"({"shared_prefix_tokens": 1000000})") == "/workload/shared_prefix_tokens");
  CHECK(parse_workload(json::parse(R"({"prompt_tokens": {"dist": "uniform", "min": 10, "max": 40},
                                       "prefix": {"tokens": 39}})"))
            .has_value());
  CHECK(field(R"({"prompt_tokens": {"dist": "lognormal", "median": 100, "p95": 400},
                  "prefix": {"ratio": 0.5, "cache": "warm"}})") == "/workload/prefix/ratio");
  CHECK(check_dataset_workload(json::parse(R"({"dataset": {"id": "ds-0123456789abcdef"}, "prefix": {"tokens": 4}})"))
            ->field == "/workload/prefix/tokens");
  CHECK_FALSE(check_dataset_workload(
      json::parse(R"({"dataset": {"id": "ds-0123456789abcdef"}, "prefix": {"cache": "cold"}})")));
}

TEST_CASE("workload: request i carries prefix i mod count, and a salt makes every word its own") {
  WorkloadSpec spec;
  spec.prompt_tokens = LengthDist::fixed(100);
  spec.seed = 9;
  spec.prefix = {.tokens = 60, .count = 3};
  Workload w(spec, PromptSynth(1.0, spec.prefix, spec.seed));
  const auto p0 = w.item(0).prompt, p3 = w.item(3).prompt, p1 = w.item(1).prompt;
  CHECK(words(p0) == 100);
  CHECK(first_words(p0, 60) == first_words(p3, 60));  // prefix 0 twice
  CHECK(first_words(p0, 60) != first_words(p1, 60));  // prefix 1
  CHECK(p0 != p3);                                    // distinct after the prefix
  // The warm-up sends each prefix once: exactly the prefixes the requests carry.
  const auto warm = w.warm_prompts(0);
  REQUIRE(warm.size() == 3);
  CHECK(words(warm[1]) == 60);
  CHECK(first_words(p1, 60) == warm[1] + " ");
  // Another step's salt: no word in common at the start, prefix included.
  const auto salted = w.item(0, 77).prompt;
  CHECK(first_words(salted, 16) != first_words(p0, 16));
  CHECK(first_words(salted, 60) == first_words(w.item(3, 77).prompt, 60));  // still shared within the step
  CHECK(w.warm_prompts(77)[0] + " " == first_words(salted, 60));
  // No prefix, cold: the salt still changes the prompt's start.
  WorkloadSpec plain;
  Workload pw(plain, PromptSynth(1.0));
  CHECK(first_words(pw.item(5, 1).prompt, 8) != first_words(pw.item(5).prompt, 8));
  CHECK(pw.warm_prompts(1).empty());
}

TEST_CASE("workload: a prefix ratio takes the leading part of one text per prefix") {
  WorkloadSpec spec;
  spec.prompt_tokens = LengthDist::uniform(100, 200).value();
  spec.seed = 4;
  spec.prefix = {.ratio = 0.5, .count = 1};
  Workload w(spec, PromptSynth(1.0, spec.prefix, spec.seed));
  const auto a = w.item(0), b = w.item(1);
  const int shared = static_cast<int>(std::min(a.input_tokens, b.input_tokens) / 2);
  CHECK(first_words(a.prompt, shared) == first_words(b.prompt, shared));
  CHECK(words(w.warm_prompts(0)[0]) == 100);  // half of the longest prompt (200)
  CHECK(prompt_salt("sw-1", 0) != prompt_salt("sw-2", 0));
  CHECK(prompt_salt("sw-1", 0) != prompt_salt("sw-1", std::uint64_t{1} << 32));
  CHECK(prompt_salt("sw-1", 5) == prompt_salt("sw-1", 5));
}

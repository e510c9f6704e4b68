// Dataset files (JSONL, ShareGPT), their statistics and content address, and how a workload
// takes prompts from them.
#include "llm/dataset.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/text.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"

using namespace capsweep;
using namespace capsweep::llm;
using json = nlohmann::json;

namespace {

// The error's field for a one-line JSONL file.
std::string jsonl_field(const std::string& line) {
  auto r = parse_jsonl(line + "\n");
  return r ? std::string("(parsed)") : r.error().field;
}

std::vector<DatasetEntry> numbered(int n) {
  std::vector<DatasetEntry> out;
  for (int i = 0; i < n; ++i) {
    DatasetEntry e;
    e.prompt = "prompt " + std::to_string(i);
    e.output_tokens = static_cast<std::uint32_t>(10 + i);
    out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("dataset: JSONL items take prompt or messages, lengths and quality fields") {
  const std::string text =
      R"({"prompt": "one two three", "output_tokens": 7, "max_tokens": 9, "id": "ignored"})"
      "\n"
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]})"
      "\n"
      R"({"prompt": "json please", "response_format": {"type": "json_object"}, "expect": {"answer": "42"}, "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}], "tool_choice": "auto"})"
      "\n";
  auto d = parse_jsonl(text).value();
  REQUIRE(d.size() == 3);
  CHECK(d[0].prompt == "one two three");
  CHECK(d[0].output_tokens == 7u);
  CHECK(d[0].max_tokens == 9u);
  CHECK(d[0].messages.empty());
  CHECK(d[0].quality.empty());
  CHECK(d[1].prompt == "be brief\n\nhi there");
  CHECK(json::parse(d[1].messages).size() == 2);
  CHECK(json::parse(d[1].messages)[1]["content"] == "hi there");
  const json q = json::parse(d[2].quality);
  CHECK(q["response_format"]["type"] == "json_object");
  CHECK(q["expect"]["answer"] == "42");
  CHECK(q["tools"].size() == 1);
  CHECK(q["tool_choice"] == "auto");
}

TEST_CASE("dataset: JSONL errors name the line and the field") {
  CHECK(jsonl_field(R"({"prompt": "a"})") == "(parsed)");
  CHECK(jsonl_field("{bad") == "line 1: /");
  CHECK(jsonl_field("[1]") == "line 1: /");
  CHECK(jsonl_field(R"({"text": "x"})") == "line 1: /prompt");
  CHECK(jsonl_field(R"({"prompt": "x", "messages": []})") == "line 1: /messages");
  CHECK(jsonl_field(R"({"prompt": 3})") == "line 1: /prompt");
  CHECK(jsonl_field(R"({"prompt": "   "})") == "line 1: /prompt");
  CHECK(jsonl_field(R"({"messages": []})") == "line 1: /messages");
  CHECK(jsonl_field(R"({"messages": [3]})") == "line 1: /messages/0");
  CHECK(jsonl_field(R"({"messages": [{"content": "x"}]})") == "line 1: /messages/0/role");
  CHECK(jsonl_field(R"({"messages": [{"role": "user", "content": 5}]})") == "line 1: /messages/0/content");
  CHECK(jsonl_field(R"({"prompt": "x", "max_tokens": 0})") == "line 1: /max_tokens");
  CHECK(jsonl_field(R"({"prompt": "x", "output_tokens": 1.5})") == "line 1: /output_tokens");
  CHECK(jsonl_field(R"({"prompt": "x", "output_tokens": 1000001})") == "line 1: /output_tokens");
  CHECK(jsonl_field(R"({"prompt": "x", "response_format": "json"})") == "line 1: /response_format/type");
  CHECK(jsonl_field(R"({"prompt": "x", "response_format": {"type": "yaml"}})") == "line 1: /response_format/type");
  CHECK(jsonl_field(R"({"prompt": "x", "response_format": {"type": "json_schema"}})") ==
        "line 1: /response_format/json_schema/schema");
  CHECK(jsonl_field(R"({"prompt": "x", "expect": {"regex": "(a"}})") == "line 1: /expect");
  CHECK(jsonl_field(R"({"prompt": "x", "tools": [{"type": "function"}]})") == "line 1: /tools/0/function/name");
  CHECK(
      jsonl_field(R"({"prompt": "x", "tools": [{"function": {"name": "f", "parameters": {"$ref": "http://x/s"}}}]})") ==
      "line 1: /tools/0/function/parameters");
  CHECK(jsonl_field(
            R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": 5}}}})") ==
        "line 1: /response_format/json_schema/schema");
  CHECK(jsonl_field(R"({"prompt": "x", "tools": [1]})") == "line 1: /tools/0");
  CHECK(jsonl_field(R"({"prompt": "x", "tool_choice": 1})") == "line 1: /tool_choice");
  CHECK(jsonl_field(R"({"prompt": "x", "expect": []})") == "line 1: /expect");
  auto r = parse_jsonl("{\"prompt\": \"ok\"}\n\n{\"prompt\": \"ok\", \"max_tokens\": -1}\n");
  REQUIRE_FALSE(r.has_value());
  CHECK(r.error().field == "line 3: /max_tokens");
  CHECK(r.error().message.find("line 3") != std::string::npos);
  CHECK(r.error().code == errc::parse_error);
}

TEST_CASE("dataset: ShareGPT is read entry by entry - errors name the entry and field") {
  auto d = parse_sharegpt(R"([
    {"conversations": [{"from": "human", "value": "a b"}, {"from": "gpt", "value": "c d e"}], "tags": [[1, [2]]]},
    {"conversations": [{"from": "human", "value": "lonely"}]},
    {"conversations": [{"from": "human", "value": "x"}, {"from": "gpt", "value": "y"}]}
  ])")
               .value();
  REQUIRE(d.size() == 2);
  CHECK(d[0].prompt == "a b");
  CHECK(d[0].reference_output_words == 3);
  CHECK(d[1].prompt == "x");
  CHECK(parse_sharegpt("[1]").error().field == "/0/conversations");
  CHECK(parse_sharegpt(R"([{"conversations": []}, [1]])").error().field == "/1/conversations");
  CHECK(parse_sharegpt(R"([{"conversations": [{"from": 1, "value": "a"}, {"value": "b"}]}])").error().field ==
        "/0/conversations/0/from");
  CHECK(parse_sharegpt(R"({"conversations": []})").error().message.find("array") != std::string::npos);
  CHECK(parse_sharegpt(R"([{"conversations": [{"value": "a"}, {"value": "b"}]}, )")
            .error()
            .message.find("not valid JSON") != std::string::npos);
}

TEST_CASE("dataset: formats, statistics and the content address") {
  CHECK(sniff_dataset_format("  \n[{}]") == DatasetFormat::sharegpt);
  CHECK(sniff_dataset_format("{\"prompt\": \"a\"}") == DatasetFormat::jsonl);
  CHECK(parse_dataset_format("sharegpt") == DatasetFormat::sharegpt);
  CHECK_FALSE(parse_dataset_format("csv").has_value());
  // The published SHA-256 test vector of "abc".
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(dataset_id(sha256_hex("abc")) == "ds-ba7816bf8f01cfea");
  CHECK(is_dataset_id("ds-ba7816bf8f01cfea"));
  CHECK_FALSE(is_dataset_id("ds-BA7816BF8F01CFEA"));
  CHECK_FALSE(is_dataset_id("ds-ba7816bf8f01cfe"));
  CHECK_FALSE(is_dataset_id("sw-ba7816bf8f01cfea"));

  std::string text;
  for (int i = 1; i <= 100; ++i) {
    std::string prompt;
    for (int w = 0; w < i; ++w) prompt += "w ";
    text += json{{"prompt", prompt}}.dump();
    if (i % 2 == 0) text.pop_back(), text += ", \"output_tokens\": " + std::to_string(i) + "}";
    text += "\n";
  }
  auto ds = parse_dataset(DatasetFormat::jsonl, text).value();
  CHECK(ds.stats.items == 100);
  CHECK(ds.stats.prompt_tokens.count == 100);
  CHECK(ds.stats.prompt_tokens.p50 == Approx(50.5));
  CHECK(ds.stats.prompt_tokens.p95 == Approx(95.05));
  CHECK(ds.stats.prompt_tokens.max == 100);
  CHECK(ds.stats.output_tokens.count == 50);  // only the even items give an output length
  CHECK(ds.stats.output_tokens.max == 100);
  CHECK_FALSE(parse_dataset(DatasetFormat::sharegpt, text).has_value());
}

TEST_CASE("dataset: a workload takes entries in order or in one seeded permutation") {
  WorkloadSpec spec;
  spec.dataset = DatasetRef{"ds-0000000000000000", "", false, true};
  Workload seq(spec, PromptSynth(1.0), numbered(10));
  for (std::uint64_t i = 0; i < 25; ++i) {
    CHECK(seq.entry_of(i) == i % 10);
    CHECK(seq.item(i).prompt == "prompt " + std::to_string(i % 10));
    CHECK(seq.item(i).max_tokens == 10 + i % 10);  // output_tokens from the entry
  }
  spec.dataset->shuffled = true;
  spec.seed = 7;
  Workload a(spec, PromptSynth(1.0), numbered(10));
  Workload b(spec, PromptSynth(1.0), numbered(10));
  std::set<std::size_t> seen;
  bool moved = false;
  for (std::uint64_t i = 0; i < 10; ++i) {
    CHECK(a.entry_of(i) == b.entry_of(i));
    CHECK(a.entry_of(i + 10) == a.entry_of(i));
    seen.insert(a.entry_of(i));
    moved = moved || a.entry_of(i) != i;
  }
  CHECK(seen.size() == 10);  // a permutation: every entry once per pass
  CHECK(moved);
  spec.seed = 8;
  Workload c(spec, PromptSynth(1.0), numbered(10));
  bool differs = false;
  for (std::uint64_t i = 0; i < 10; ++i) differs = differs || c.entry_of(i) != a.entry_of(i);
  CHECK(differs);

  // A distribution instead of the dataset's lengths.
  spec.dataset->output_from_dataset = false;
  spec.output_tokens = LengthDist::fixed(33);
  Workload d(spec, PromptSynth(1.0), numbered(10));
  CHECK(d.item(3).max_tokens == 33);
}

TEST_CASE("dataset: the job's workload.dataset parses, and its errors name the field") {
  auto w = parse_workload(json::parse(R"({"dataset": {"id": "ds-0123456789abcdef", "order": "shuffled"}})")).value();
  REQUIRE(w.dataset.has_value());
  CHECK(w.dataset->id == "ds-0123456789abcdef");
  CHECK(w.dataset->shuffled);
  CHECK(w.dataset->output_from_dataset);
  auto v =
      parse_workload(
          json::parse(R"({"dataset": {"id": "ds-0123456789abcdef", "output_tokens": {"dist": "fixed", "value": 5}}})"))
          .value();
  CHECK_FALSE(v.dataset->output_from_dataset);
  Rng rng(1);
  CHECK(v.output_tokens.sample(rng) == 5);
  auto field = [](const char* text) { return parse_workload(json::parse(text)).error().field; };
  CHECK(field(R"({"dataset": 3})") == "/workload/dataset");
  CHECK(field(R"({"dataset": {}})") == "/workload/dataset/id");
  CHECK(field(R"({"dataset": {"id": "sw-0123456789abcdef"}})") == "/workload/dataset/id");
  CHECK(field(R"({"dataset": {"id": "ds-0123456789abcdef", "order": "random"}})") == "/workload/dataset/order");
  CHECK(field(R"({"dataset": {"id": "ds-0123456789abcdef", "sha256": "abc"}})") == "/workload/dataset/sha256");
  CHECK(
      field(
          R"({"dataset": {"id": "ds-0123456789abcdef", "sha256": "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"}})") ==
      "/workload/dataset/sha256");
  CHECK(field(R"({"dataset": {"id": "ds-0123456789abcdef", "output_tokens": "max"}})") ==
        "/workload/dataset/output_tokens");
  CHECK(field(R"({"dataset": {"id": "ds-0123456789abcdef", "output_tokens": {"dist": "zipf"}}})") ==
        "/workload/dataset/output_tokens/dist");
  CHECK(field(R"({"dataset": {"id": "ds-0123456789abcdef", "size": 1}})") == "/workload/dataset/size");
  // As written by the caller (before defaults): prompts come from the dataset only.
  auto raw = [](const char* text) {
    auto e = check_dataset_workload(json::parse(text));
    return e ? e->field : std::string("(fine)");
  };
  CHECK(raw(R"({"dataset": {"id": "ds-0123456789abcdef"}, "output_tokens": {"dist": "fixed", "value": 5}})") ==
        "(fine)");
  CHECK(raw(R"({"prompt_tokens": {"dist": "fixed", "value": 5}})") == "(fine)");
  CHECK(raw(R"({"dataset": {"id": "ds-0123456789abcdef"}, "prompt_tokens": {"dist": "fixed", "value": 5}})") ==
        "/workload/prompt_tokens");
  CHECK(raw(R"({"dataset": {"id": "ds-0123456789abcdef"}, "shared_prefix_tokens": 4})") ==
        "/workload/shared_prefix_tokens");
  CHECK(raw(R"({"dataset": {"id": "ds-0123456789abcdef", "output_tokens": {"dist": "fixed", "value": 5}},
                "output_tokens": {"dist": "fixed", "value": 5}})") == "/workload/output_tokens");
}

TEST_CASE("dataset: a chat target sends a messages item's messages as they are") {
  Target t;
  t.api = Api::chat;
  t.model = "m";
  const std::string messages = R"([{"role":"system","content":"s"},{"role":"user","content":"u"}])";
  auto body = json::parse(completion_body(t, "s\n\nu", 12, messages));
  CHECK(body["messages"] == json::parse(messages));
  CHECK(body["max_completion_tokens"] == 12);
  auto plain = json::parse(completion_body(t, "hello", 3));
  CHECK(plain["messages"].size() == 1);
  CHECK(plain["messages"][0]["content"] == "hello");
  t.api = Api::completions;
  auto completions = json::parse(completion_body(t, "s\n\nu", 12, messages));
  CHECK(completions["prompt"] == "s\n\nu");
  CHECK_FALSE(completions.contains("messages"));
}

TEST_CASE("dataset: scanning an upload gives the statistics of parsing it, and the same first error") {
  const std::string jsonl =
      "{\"prompt\": \"a b c\", \"max_tokens\": 7}\n{\"prompt\": \"d\"}\n{\"prompt\": \"e f\", \"output_tokens\": 3}\n";
  const std::string sharegpt = R"([{"conversations": [{"value": "one two"}, {"value": "x y z"}]},
                                   {"conversations": [{"value": "solo"}]},
                                   {"conversations": [{"value": "a b c d"}, {"value": "w"}]}])";
  for (const auto& [format, text] : {std::pair{DatasetFormat::jsonl, jsonl}, {DatasetFormat::sharegpt, sharegpt}}) {
    auto scanned = scan_dataset(format, text);
    auto parsed = parse_dataset(format, text);
    REQUIRE(scanned.has_value());
    REQUIRE(parsed.has_value());
    CHECK(scanned->items == parsed->stats.items);
    CHECK(scanned->prompt_tokens.p50 == parsed->stats.prompt_tokens.p50);
    CHECK(scanned->prompt_tokens.max == parsed->stats.prompt_tokens.max);
    CHECK(scanned->output_tokens.count == parsed->stats.output_tokens.count);
    CHECK(scanned->output_tokens.p95 == parsed->stats.output_tokens.p95);
  }
  CHECK(scan_dataset(DatasetFormat::jsonl, jsonl)->output_tokens.count == 2);
  CHECK(scan_dataset(DatasetFormat::sharegpt, sharegpt)->items == 2);  // a one-turn entry is skipped
  auto bad = scan_dataset(DatasetFormat::jsonl, jsonl + "{\"prompt\": 5}\n");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().field == "line 4: /prompt");
}

namespace {
std::string trace_field(const std::string& text) {
  auto r = parse_trace(text);
  return r ? std::string("(parsed)") : r.error().field;
}
}  // namespace

TEST_CASE("dataset: a trace's rows parse with their arrivals, lengths and block ids") {
  const auto rows = parse_trace(
                        "{\"timestamp\": 0, \"input_length\": 1024, \"output_length\": 16, \"hash_ids\": [0, 1]}\n"
                        "\n"
                        "{\"timestamp\": 250.5, \"input_length\": 600, \"output_length\": 8, \"session\": \"x\"}\n")
                        .value();
  REQUIRE(rows.size() == 2);
  CHECK(*rows[0].timestamp_ms == 0);
  CHECK(rows[0].input_length == 1024);
  CHECK(*rows[0].output_tokens == 16);
  CHECK(rows[0].hash_ids == std::vector<std::uint64_t>{0, 1});
  CHECK(*rows[1].timestamp_ms == 250.5);
  CHECK(rows[1].hash_ids.empty());
  CHECK(parse_dataset_format("trace") == DatasetFormat::trace);
  CHECK(to_string(DatasetFormat::trace) == "trace");
  const auto stats =
      scan_dataset(DatasetFormat::trace, "{\"timestamp\": 0, \"input_length\": 7, \"output_length\": 3}\n").value();
  CHECK(stats.prompt_tokens.max == 7);  // the recorded length, not the (absent) prompt's words
  CHECK(stats.output_tokens.max == 3);
}

TEST_CASE("dataset: a trace's bad rows are errors naming the line and the field") {
  CHECK(trace_field("{\"input_length\": 5, \"output_length\": 5}") == "line 1: /timestamp");
  CHECK(trace_field("{\"timestamp\": -1, \"input_length\": 5, \"output_length\": 5}") == "line 1: /timestamp");
  CHECK(trace_field("{\"timestamp\": 9, \"input_length\": 5, \"output_length\": 5}\n"
                    "{\"timestamp\": 3, \"input_length\": 5, \"output_length\": 5}") == "line 2: /timestamp");
  CHECK(trace_field("{\"timestamp\": 0, \"output_length\": 5}") == "line 1: /input_length");
  CHECK(trace_field("{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 5}") == "line 1: /input_length");
  CHECK(trace_field("{\"timestamp\": 0, \"input_length\": 5}") == "line 1: /output_length");
  CHECK(trace_field("{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 5, \"hash_ids\": 3}") ==
        "line 1: /hash_ids");
  CHECK(trace_field("{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 5, \"hash_ids\": [1, -2]}") ==
        "line 1: /hash_ids/1");
  CHECK(trace_field("[1]") == "line 1: /");
  // A timestamp past 2^53 ms, or a trace spanning more than 10^10 ms: no replay time overflows.
  CHECK(trace_field("{\"timestamp\": 1e308, \"input_length\": 5, \"output_length\": 5}") == "line 1: /timestamp");
  CHECK(trace_field("{\"timestamp\": 0, \"input_length\": 5, \"output_length\": 5}\n"
                    "{\"timestamp\": 2e10, \"input_length\": 5, \"output_length\": 5}") == "line 2: /timestamp");
  CHECK(parse_trace("{\"timestamp\": 1733400000000, \"input_length\": 5, \"output_length\": 5}\n"
                    "{\"timestamp\": 1733400000500, \"input_length\": 5, \"output_length\": 5}")
            .has_value());  // epoch milliseconds are fine
  CHECK_FALSE(parse_trace("\n\n").has_value());
}

TEST_CASE("dataset: a trace row's prompt is its blocks' shared text, then text of its own") {
  const auto rows = parse_trace(
                        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 4, \"hash_ids\": [7, 8]}\n"
                        "{\"timestamp\": 5, \"input_length\": 40, \"output_length\": 6, \"hash_ids\": [7, 9]}\n"
                        "{\"timestamp\": 9, \"input_length\": 12, \"output_length\": 2, \"hash_ids\": [7, 8]}\n")
                        .value();
  WorkloadSpec spec;
  DatasetRef ref;
  ref.id = "ds-0123456789abcdef";
  ref.block_tokens = 16;
  spec.dataset = ref;
  Workload w(spec, PromptSynth(1.0), rows);
  CHECK(w.trace_offsets() == std::vector<Nanos>{Nanos(0), std::chrono::milliseconds(5), std::chrono::milliseconds(9)});
  const std::uint64_t base = std::uint64_t{3} << 32;  // a step's request index base: row k is request k
  const auto a = w.item(base + 0), b = w.item(base + 1), c = w.item(base + 2), again = w.item(base + 3);
  CHECK(count_words(a.prompt) == 40);
  CHECK(a.input_tokens == 40);
  CHECK(a.max_tokens == 4);
  CHECK(b.max_tokens == 6);
  const auto words_of = [](const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string word; in >> word;) out.push_back(word);
    return out;
  };
  const auto wa = words_of(a.prompt), wb = words_of(b.prompt), wc = words_of(c.prompt);
  CHECK(std::equal(wa.begin(), wa.begin() + 16, wb.begin()));                  // block 7 shared
  CHECK_FALSE(std::equal(wa.begin() + 16, wa.begin() + 32, wb.begin() + 16));  // blocks 8 and 9 differ
  CHECK(wc.size() == 12);
  CHECK(std::equal(wc.begin(), wc.end(), wa.begin()));  // cut inside block 7
  // A loop's request 3 is row 0 again: its blocks' text, and text of its own after them.
  const auto wagain = words_of(again.prompt);
  CHECK(std::equal(wa.begin(), wa.begin() + 32, wagain.begin()));
  CHECK(again.prompt != a.prompt);
  CHECK(w.item(base + 0, 99).prompt != a.prompt);  // a cold step's salt changes the blocks
}

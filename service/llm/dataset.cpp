#include "llm/dataset.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/quality.hpp"
#include "core/stats.hpp"
#include "core/text.hpp"

namespace capsweep::llm {
namespace {

using json = nlohmann::json;

// A problem with one item: the message names the place, the field is "line N: /pointer"
// (JSONL) or "/N/pointer" (ShareGPT).
struct ItemError {
  std::string pointer;  // within the item, "" for the item itself
  std::string message;
};

std::optional<std::uint32_t> length_field(const json& item, const char* key, std::optional<ItemError>& err) {
  auto it = item.find(key);
  if (it == item.end()) return std::nullopt;
  if (!it->is_number_integer() || it->get<std::int64_t>() < 1 || it->get<std::int64_t>() > kMaxDatasetTokens) {
    err = ItemError{fmt::format("/{}", key), fmt::format("must be an integer in [1, {}]", kMaxDatasetTokens)};
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(it->get<std::int64_t>());
}

// The chat messages of an item: a non-empty array of {"role": string, "content": string}.
std::optional<ItemError> read_messages(const json& messages, DatasetEntry& out) {
  if (!messages.is_array() || messages.empty()) return ItemError{"/messages", "must be a non-empty array of messages"};
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string at = fmt::format("/messages/{}", i);
    if (!m.is_object()) return ItemError{at, "must be an object with \"role\" and \"content\""};
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || role->get_ref<const std::string&>().empty()) {
      return ItemError{at + "/role", "must be a non-empty string (system, user, assistant, tool)"};
    }
    auto content = m.find("content");
    if (content == m.end() || !content->is_string()) return ItemError{at + "/content", "must be a string"};
    if (!out.prompt.empty()) out.prompt += "\n\n";
    out.prompt += content->get_ref<const std::string&>();
  }
  out.messages = messages.dump();
  return std::nullopt;
}

std::optional<ItemError> read_quality_fields(const json& item, DatasetEntry& out) {
  json q = json::object();
  if (auto it = item.find("response_format"); it != item.end()) {
    const json type = it->is_object() ? it->value("type", json()) : json();
    if (type != "json_object" && type != "json_schema" && type != "text") {
      return ItemError{"/response_format/type", "must be \"json_object\", \"json_schema\" or \"text\""};
    }
    if (type == "json_schema") {
      const json spec = it->value("json_schema", json());
      if (!spec.is_object() || !spec.value("schema", json()).is_object()) {
        return ItemError{"/response_format/json_schema/schema", "must be an object: the JSON Schema answers must meet"};
      }
      if (auto problem = schema_problem(spec["schema"]))
        return ItemError{"/response_format/json_schema/schema", *problem};
    }
    q["response_format"] = *it;
  }
  if (auto it = item.find("tools"); it != item.end()) {
    if (!it->is_array()) return ItemError{"/tools", "must be an array of tool objects"};
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& tool = (*it)[i];
      if (!tool.is_object()) return ItemError{fmt::format("/tools/{}", i), "must be an object"};
      const json f = tool.value("function", json());
      if (!f.is_object() || !f.value("name", json()).is_string()) {
        return ItemError{fmt::format("/tools/{}/function/name", i),
                         "a tool is {\"type\": \"function\", \"function\": {\"name\", \"parameters\"}}"};
      }
      if (f.contains("parameters")) {
        if (auto problem = schema_problem(f["parameters"])) {
          return ItemError{fmt::format("/tools/{}/function/parameters", i), *problem};
        }
      }
    }
    q["tools"] = *it;
  }
  if (auto it = item.find("tool_choice"); it != item.end()) {
    if (!it->is_string() && !it->is_object()) return ItemError{"/tool_choice", "must be a string or an object"};
    q["tool_choice"] = *it;
  }
  if (auto it = item.find("expect"); it != item.end()) {
    if (auto problem = expect_problem(*it)) return ItemError{"/expect", *problem};
    q["expect"] = *it;
  }
  if (!q.empty()) out.quality = q.dump();
  return std::nullopt;
}

std::optional<ItemError> read_jsonl_item(const json& item, DatasetEntry& out) {
  if (!item.is_object()) return ItemError{"", "must be a JSON object"};
  const auto prompt = item.find("prompt");
  const auto messages = item.find("messages");
  if (prompt == item.end() && messages == item.end()) {
    return ItemError{"/prompt", "is missing: an item needs \"prompt\" (a string) or \"messages\" (an array)"};
  }
  if (prompt != item.end() && messages != item.end()) {
    return ItemError{"/messages", "give \"prompt\" or \"messages\", not both"};
  }
  if (prompt != item.end()) {
    if (!prompt->is_string()) return ItemError{"/prompt", "must be a string"};
    out.prompt = prompt->get<std::string>();
  } else if (auto e = read_messages(*messages, out)) {
    return e;
  }
  if (count_words(out.prompt) == 0) {
    return ItemError{prompt != item.end() ? "/prompt" : "/messages", "the prompt is empty"};
  }
  if (count_words(out.prompt) > kMaxDatasetTokens) {
    return ItemError{prompt != item.end() ? "/prompt" : "/messages",
                     fmt::format("the prompt is longer than {} words", kMaxDatasetTokens)};
  }
  std::optional<ItemError> err;
  out.max_tokens = length_field(item, "max_tokens", err);
  if (err) return err;
  out.output_tokens = length_field(item, "output_tokens", err);
  if (err) return err;
  return read_quality_fields(item, out);
}

// A trace's timestamps: at most 2^53 ms (exact as a double; epoch milliseconds fit), and the
// whole trace within 10^10 ms (115 days) of its first row, so every offset is exact in
// nanoseconds and a replay's times never overflow.
constexpr double kMaxTraceTimestampMs = 9007199254740992.0;
constexpr double kMaxTraceSpanMs = 1e10;

// One row of a trace; `first_ms` and `previous_ms`: the first row's and the row before's
// timestamps (none for the first row; the rows are in time order).
std::optional<ItemError> read_trace_row(const json& item, std::optional<double> first_ms, double previous_ms,
                                        DatasetEntry& out) {
  if (!item.is_object()) return ItemError{"", "must be a JSON object"};
  const auto ts = item.find("timestamp");
  if (ts == item.end() || !ts->is_number() || !(ts->get<double>() >= 0) ||
      !(ts->get<double>() <= kMaxTraceTimestampMs)) {
    return ItemError{"/timestamp", "must be a number of milliseconds from 0 to 2^53"};
  }
  if (ts->get<double>() < previous_ms) {
    return ItemError{"/timestamp",
                     fmt::format("is earlier than the row before ({} ms): a trace is in time order", previous_ms)};
  }
  if (first_ms && ts->get<double>() - *first_ms > kMaxTraceSpanMs) {
    return ItemError{"/timestamp", fmt::format("is {:.0f} ms after the first row: a trace spans at most {:.0f} ms",
                                               ts->get<double>() - *first_ms, kMaxTraceSpanMs)};
  }
  out.timestamp_ms = ts->get<double>();
  std::optional<ItemError> err;
  const auto input = length_field(item, "input_length", err);
  if (err) return err;
  if (!input) return ItemError{"/input_length", "is required: the prompt's length in tokens"};
  out.input_length = *input;
  out.output_tokens = length_field(item, "output_length", err);
  if (err) return err;
  if (!out.output_tokens) return ItemError{"/output_length", "is required: the answer's length in tokens"};
  if (auto ids = item.find("hash_ids"); ids != item.end()) {
    if (!ids->is_array() || ids->size() > 100'000) {
      return ItemError{"/hash_ids", "must be an array of at most 100000 block ids"};
    }
    for (std::size_t i = 0; i < ids->size(); ++i) {
      const json& id = (*ids)[i];
      if (!id.is_number_unsigned() || id.get<std::uint64_t>() > (std::uint64_t{1} << 53)) {
        return ItemError{fmt::format("/hash_ids/{}", i), "must be an integer in [0, 2^53]"};
      }
      out.hash_ids.push_back(id.get<std::uint64_t>());
    }
  }
  return std::nullopt;
}

DatasetStats::Lengths lengths_of(std::vector<double> values) {
  DatasetStats::Lengths l;
  l.count = values.size();
  if (values.empty()) return l;
  std::sort(values.begin(), values.end());
  l.p50 = percentile_sorted(values, 50);
  l.p95 = percentile_sorted(values, 95);
  l.max = values.back();
  return l;
}

}  // namespace

std::string_view to_string(DatasetFormat f) noexcept {
  switch (f) {
    case DatasetFormat::sharegpt:
      return "sharegpt";
    case DatasetFormat::trace:
      return "trace";
    case DatasetFormat::jsonl:
      break;
  }
  return "jsonl";
}

std::optional<DatasetFormat> parse_dataset_format(std::string_view s) noexcept {
  for (auto f : {DatasetFormat::jsonl, DatasetFormat::sharegpt, DatasetFormat::trace}) {
    if (s == to_string(f)) return f;
  }
  return std::nullopt;
}

DatasetFormat sniff_dataset_format(std::string_view text) noexcept {
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    return c == '[' ? DatasetFormat::sharegpt : DatasetFormat::jsonl;
  }
  return DatasetFormat::jsonl;
}

namespace {

using EntrySink = std::function<void(DatasetEntry&&)>;

// Each item of a JSONL file (a trace's rows with `trace`), checked, to `sink`; the count of
// items or the first error.
Result<std::size_t> each_jsonl_item(std::string_view text, const EntrySink& sink, bool trace = false) {
  double previous_ms = 0;
  std::optional<double> first_ms;
  std::size_t items = 0;
  std::optional<Error> failure;
  for_each_line(text, [&](std::string_view line, std::size_t line_no) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    if (line.empty()) return true;
    auto fail = [&](const ItemError& e) {
      const std::string field = fmt::format("line {}: {}", line_no, e.pointer.empty() ? "/" : e.pointer);
      failure = Error{errc::parse_error, fmt::format("JSONL {}: {}", field, e.message), field};
      return false;
    };
    auto j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return fail({"", "not valid JSON"});
    DatasetEntry d;
    if (auto e = trace ? read_trace_row(j, first_ms, previous_ms, d) : read_jsonl_item(j, d)) return fail(*e);
    previous_ms = d.timestamp_ms.value_or(0);
    if (!first_ms) first_ms = d.timestamp_ms;
    sink(std::move(d));
    ++items;
    return true;
  });
  if (failure) return *failure;
  if (items == 0) return Error{errc::parse_error, trace ? "the trace has no row" : "the JSONL file has no prompt", ""};
  return items;
}

// Each usable conversation of a ShareGPT file, checked, to `sink`; the count or the first error.
Result<std::size_t> each_sharegpt_entry(std::string_view text, const EntrySink& sink) {
  std::size_t items = 0;
  std::optional<Error> failure;
  std::size_t index = 0;  // of the top-level entry being read
  bool top_is_array = false;
  auto fail = [&](std::string field, std::string message) {
    if (!failure) failure = Error{errc::parse_error, std::move(message), std::move(field)};
  };
  // Each top-level entry is built, read and dropped in turn (the callback returns false for
  // it), so the parsed document never holds more than one conversation.
  auto on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 0 && (event == json::parse_event_t::array_start || event == json::parse_event_t::object_start)) {
      top_is_array = event == json::parse_event_t::array_start;
      return true;
    }
    if (depth != 1) return true;
    const bool entry_end = event == json::parse_event_t::object_end || event == json::parse_event_t::array_end ||
                           event == json::parse_event_t::value;
    if (!entry_end || !top_is_array) return true;
    const std::size_t i = index++;
    if (failure) return false;
    const std::string where = fmt::format("/{}/conversations", i);
    if (!parsed.is_object() || !parsed.contains("conversations") || !parsed["conversations"].is_array()) {
      fail(where, fmt::format("entry {} has no 'conversations' array", i));
      return false;
    }
    const json& turns = parsed["conversations"];
    if (turns.size() < 2) return false;
    for (std::size_t t = 0; t < 2; ++t) {
      if (!turns[t].is_object() || !turns[t].contains("value") || !turns[t]["value"].is_string()) {
        fail(fmt::format("{}/{}/value", where, t), fmt::format("entry {} turn {} has no string 'value'", i, t));
        return false;
      }
      if (auto f = turns[t].find("from"); f != turns[t].end() && !f->is_string()) {
        fail(fmt::format("{}/{}/from", where, t), fmt::format("entry {} turn {}: 'from' must be a string", i, t));
        return false;
      }
    }
    DatasetEntry d;
    d.prompt = turns[0]["value"].get<std::string>();
    d.reference_output_words = count_words(turns[1]["value"].get_ref<const std::string&>());
    if (count_words(d.prompt) == 0 || d.reference_output_words == 0) return false;
    if (count_words(d.prompt) > kMaxDatasetTokens || d.reference_output_words > kMaxDatasetTokens) {
      fail(where, fmt::format("entry {} is longer than {} words", i, kMaxDatasetTokens));
      return false;
    }
    sink(std::move(d));
    ++items;
    return false;
  };
  auto doc = json::parse(text, on_event, false);
  if (failure) return *failure;
  if (doc.is_discarded()) return Error{errc::parse_error, "the ShareGPT file is not valid JSON", ""};
  if (!top_is_array) return Error{errc::parse_error, "a ShareGPT file is a JSON array of conversations", ""};
  if (items == 0) return Error{errc::parse_error, "the ShareGPT file has no usable conversation", ""};
  return items;
}

Result<std::size_t> each_entry(DatasetFormat format, std::string_view text, const EntrySink& sink) {
  if (format == DatasetFormat::sharegpt) return each_sharegpt_entry(text, sink);
  return each_jsonl_item(text, sink, format == DatasetFormat::trace);
}

// The length an entry gives of `which` (nullopt: none).
std::optional<std::uint32_t> entry_length(const DatasetEntry& e, DatasetLength which) {
  if (which == DatasetLength::prompt) return e.timestamp_ms ? e.input_length : count_words(e.prompt);
  if (e.output_tokens) return *e.output_tokens;
  if (e.max_tokens) return *e.max_tokens;
  if (e.reference_output_words) return e.reference_output_words;
  return std::nullopt;
}

DatasetStats stats_of(std::size_t items, const std::vector<std::uint32_t>& prompts,
                      const std::vector<std::uint32_t>& outputs) {
  DatasetStats s;
  s.items = items;
  s.prompt_tokens = lengths_of(std::vector<double>(prompts.begin(), prompts.end()));
  s.output_tokens = lengths_of(std::vector<double>(outputs.begin(), outputs.end()));
  return s;
}

}  // namespace

Result<std::vector<DatasetEntry>> parse_jsonl(std::string_view text) {
  std::vector<DatasetEntry> out;
  auto n = each_jsonl_item(text, [&](DatasetEntry&& e) { out.push_back(std::move(e)); });
  if (!n) return n.error();
  return out;
}

Result<std::vector<DatasetEntry>> parse_trace(std::string_view text) {
  std::vector<DatasetEntry> out;
  auto n = each_jsonl_item(
      text, [&](DatasetEntry&& e) { out.push_back(std::move(e)); }, true);
  if (!n) return n.error();
  return out;
}

Result<std::vector<DatasetEntry>> parse_sharegpt(std::string_view text) {
  std::vector<DatasetEntry> out;
  auto n = each_sharegpt_entry(text, [&](DatasetEntry&& e) { out.push_back(std::move(e)); });
  if (!n) return n.error();
  return out;
}

Result<DatasetStats> scan_dataset(DatasetFormat format, std::string_view text) {
  std::vector<std::uint32_t> prompts, outputs;
  auto n = each_entry(format, text, [&](DatasetEntry&& e) {
    prompts.push_back(*entry_length(e, DatasetLength::prompt));
    if (auto o = entry_length(e, DatasetLength::output)) outputs.push_back(*o);
  });
  if (!n) return n.error();
  return stats_of(*n, prompts, outputs);
}

std::vector<std::uint32_t> dataset_lengths(const std::vector<DatasetEntry>& entries, DatasetLength which) {
  std::vector<std::uint32_t> out;
  out.reserve(entries.size());
  for (const auto& e : entries)
    if (auto v = entry_length(e, which)) out.push_back(*v);
  return out;
}

DatasetStats dataset_stats(const std::vector<DatasetEntry>& entries) {
  return stats_of(entries.size(), dataset_lengths(entries, DatasetLength::prompt),
                  dataset_lengths(entries, DatasetLength::output));
}

Result<Dataset> parse_dataset(DatasetFormat format, std::string_view text) {
  auto entries = format == DatasetFormat::sharegpt ? parse_sharegpt(text)
                 : format == DatasetFormat::trace  ? parse_trace(text)
                                                   : parse_jsonl(text);
  if (!entries) return entries.error();
  Dataset d;
  d.stats = dataset_stats(*entries);
  d.entries = std::move(*entries);
  return d;
}

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md.data(), &n, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("SHA-256 failed");
  }
  std::string out;
  out.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) out += fmt::format("{:02x}", md[i]);
  return out;
}

std::string dataset_id(std::string_view sha256) {
  return "ds-" + std::string(sha256.substr(0, 16));
}

bool is_dataset_id(std::string_view id) noexcept {
  if (id.size() != 19 || id.substr(0, 3) != "ds-") return false;
  return std::all_of(id.begin() + 3, id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace capsweep::llm

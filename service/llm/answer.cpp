#include "llm/answer.hpp"

#include <cctype>
#include <map>
#include <nlohmann/json.hpp>

#include "core/json_access.hpp"
#include "core/text.hpp"

namespace capsweep::llm {

namespace {

using json = nlohmann::json;

std::string as_text(const json& j) {
  return j.is_string() ? j.get<std::string>() : std::string();
}

// One choice of a payload: a streamed delta, a whole message, or completions text.
void read_choice(const json& c, Answer& out, std::map<std::size_t, ToolCall>& calls) {
  if (auto fr = c.find("finish_reason"); fr != c.end() && fr->is_string()) out.finish_reason = fr->get<std::string>();
  if (auto t = c.find("text"); t != c.end()) out.text += as_text(*t);
  const json* m = nullptr;
  if (auto d = c.find("delta"); d != c.end() && d->is_object()) m = &*d;
  if (auto msg = c.find("message"); msg != c.end() && msg->is_object()) m = &*msg;
  if (!m) return;
  if (auto t = m->find("content"); t != m->end()) out.text += as_text(*t);
  auto tc = m->find("tool_calls");
  if (tc == m->end() || !tc->is_array()) return;
  for (std::size_t i = 0; i < tc->size(); ++i) {
    const json& call = (*tc)[i];
    if (!call.is_object()) continue;
    // Deltas name their call by index; a whole message lists the calls in order.
    const std::size_t index = call.value("index", json(i)).is_number_unsigned() ? call.value("index", i) : i;
    ToolCall& into = calls[index];
    const json f = call.value("function", json::object());
    if (!f.is_object()) continue;
    into.name += as_text(f.value("name", json()));
    into.arguments += as_text(f.value("arguments", json()));
  }
}

// A Responses API response object (a whole answer, or the one a terminal event carries): its
// usage and how it ended; its output items' text and calls where no delta brought them.
void read_response(const json& r, Answer& out, std::map<std::size_t, ToolCall>& calls) {
  const std::string status = as_text(r.value("status", json()));
  if (status == "completed") out.finish_reason = "stop";
  if (status == "incomplete") out.finish_reason = "length";
  const json& usage = json_at(r, "usage");
  if (const auto c = json_count(usage, "output_tokens")) out.completion_tokens = c;
  if (const auto p = json_count(usage, "input_tokens")) out.prompt_tokens = p;
  const json& output = r.value("output", json::array());
  if (!output.is_array() || !out.text.empty() || !calls.empty()) return;
  for (std::size_t i = 0; i < output.size(); ++i) {
    const json& item = output[i];
    if (!item.is_object()) continue;
    const std::string item_type = as_text(item.value("type", json()));
    if (item_type == "function_call") {
      calls[i] = {as_text(item.value("name", json())), as_text(item.value("arguments", json()))};
      continue;
    }
    if (item_type != "message" || !item.contains("content") || !item["content"].is_array()) continue;
    for (const json& part : item["content"]) {
      if (part.is_object() && as_text(part.value("type", json())) == "output_text") {
        out.text += as_text(part.value("text", json()));
      }
    }
  }
}

// One Responses API event ({"type": ...}): text and call-argument deltas, a call's name as its
// item is added, the terminal event's response, an error.
void read_response_event(const json& j, Answer& out, std::map<std::size_t, ToolCall>& calls) {
  const std::string type = as_text(j["type"]);
  const json& at = j.value("output_index", json(0));
  const std::size_t index = at.is_number_unsigned() ? at.get<std::size_t>() : 0;
  if (type == "response.output_text.delta") {
    out.text += as_text(j.value("delta", json()));
  } else if (type == "response.function_call_arguments.delta") {
    calls[index].arguments += as_text(j.value("delta", json()));
  } else if (type == "response.output_item.added" && j.contains("item") && j["item"].is_object() &&
             as_text(j["item"].value("type", json())) == "function_call") {
    calls[index].name += as_text(j["item"].value("name", json()));
  } else if (type == "error" || type == "response.failed") {
    const json response = j.value("response", json::object());
    const json err = type == "error" ? j : response.is_object() ? response.value("error", json()) : json();
    out.error = printable_ascii(err.is_object() ? as_text(err.value("message", json("error"))) : "error", 200);
    if (out.error.empty()) out.error = "error";
  } else if ((type == "response.completed" || type == "response.incomplete") && j.contains("response") &&
             j["response"].is_object()) {
    read_response(j["response"], out, calls);
  }
}

// The id a payload gives its answer: a Responses event's response.id, else its own "id".
std::string answer_id(const json& j) {
  if (auto r = j.find("response"); r != j.end() && r->is_object()) return as_text(r->value("id", json()));
  return as_text(j.value("id", json()));
}

}  // namespace

Answer assemble_answer(const std::vector<std::string>& events) {
  Answer out;
  std::map<std::size_t, ToolCall> calls;
  for (const std::string& data : events) {
    if (data == "[DONE]") continue;
    if (json_nesting_exceeds(data)) {
      out.malformed = true;
      continue;
    }
    const json j = json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      out.malformed = true;
      continue;
    }
    if (out.id.empty()) out.id = answer_id(j);
    const std::string object = as_text(j.value("object", json()));
    const auto e = j.find("error");  // "error": null (a Responses object's) says nothing
    if ((e != j.end() && !e->is_null()) || object == "error") {
      const json& err = e != j.end() && !e->is_null() ? *e : j;
      out.error = printable_ascii(err.is_object() ? as_text(err.value("message", json("error"))) : as_text(err), 200);
      if (out.error.empty()) out.error = "error";
      continue;
    }
    if (j.contains("type") && j["type"].is_string()) {  // the Responses API's events
      read_response_event(j, out, calls);
      continue;
    }
    if (object == "response") {  // its whole answer
      read_response(j, out, calls);
      continue;
    }
    const json& usage = json_at(j, "usage");
    if (const auto c = json_count(usage, "completion_tokens")) out.completion_tokens = c;
    if (const auto p = json_count(usage, "prompt_tokens")) out.prompt_tokens = p;
    if (auto ch = j.find("choices"); ch != j.end() && ch->is_array() && !ch->empty() && (*ch)[0].is_object()) {
      read_choice((*ch)[0], out, calls);
    }
  }
  for (auto& [index, call] : calls) out.tool_calls.push_back(std::move(call));
  return out;
}

std::uint32_t quality_max_tokens(const DatasetEntry& e, std::uint32_t default_max_tokens) {
  return e.max_tokens.value_or(default_max_tokens);
}

std::string quality_body(const Target& t, const DatasetEntry& e, std::uint32_t default_max_tokens, std::uint64_t seed) {
  json j = t.extra_body;
  j["model"] = t.model;
  const std::uint32_t max_tokens = quality_max_tokens(e, default_max_tokens);
  api_row(t.api).request(j, RequestText{.prompt = e.prompt, .messages = e.messages, .max_tokens = max_tokens});
  j["temperature"] = 0;
  j["seed"] = seed;
  if (!e.quality.empty()) {
    const json q = json::parse(e.quality, nullptr, false);
    if (q.is_object()) {
      for (const char* key : {"response_format", "tools", "tool_choice"}) {
        if (auto it = q.find(key); it != q.end()) j[key] = *it;
      }
    }
  }
  j["stream"] = t.stream;
  if (t.stream && api_row(t.api).stream_usage_option) j["stream_options"] = {{"include_usage", true}};
  j.erase("ignore_eos");
  return j.dump();
}

std::string judge_body(const Target& t, const std::string& prompt) {
  DatasetEntry e;
  e.prompt = prompt;
  e.max_tokens = 16;
  return quality_body(t, e, 16, 0);
}

std::optional<double> judge_score(std::string_view answer, std::uint32_t scale) {
  for (std::size_t i = 0; i < answer.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(answer[i]))) continue;
    std::size_t j = i;
    std::uint64_t v = 0;
    while (j < answer.size() && std::isdigit(static_cast<unsigned char>(answer[j])) && v < 1000) {
      v = v * 10 + static_cast<std::uint64_t>(answer[j] - '0');
      ++j;
    }
    if (v >= 1 && v <= scale) return static_cast<double>(v);
    return std::nullopt;  // the first number is the score, or there is none
  }
  return std::nullopt;
}

}  // namespace capsweep::llm

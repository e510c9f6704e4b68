#include "core/quality.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/text.hpp"

namespace capsweep {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

QualityVerdict fail(std::string reason) {
  return {false, std::move(reason)};
}

}  // namespace

std::optional<nlohmann::json> answer_json(std::string_view answer) {
  auto j = nlohmann::json::parse(trim(answer), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

QualityVerdict check_json_answer(std::string_view answer) {
  const std::string_view body = trim(answer);
  if (body.empty()) return fail("the answer is empty");
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    return fail(body.rfind("```", 0) == 0 ? "the JSON is wrapped in a code fence"
                                          : "the answer does not parse as JSON");
  }
  if (!j.is_object()) return fail("the answer is JSON but not an object");
  return {true, ""};
}

nlohmann::json tool_parameters(const nlohmann::json& tools, const std::string& name) {
  if (!tools.is_array()) return nullptr;
  for (const auto& t : tools) {
    const auto& f = t.is_object() ? t.value("function", nlohmann::json::object()) : nlohmann::json::object();
    if (f.is_object() && f.value("name", "") == name) return f.value("parameters", nlohmann::json());
  }
  return nullptr;
}

QualityVerdict check_tool_calls(const std::vector<ToolCall>& calls, const nlohmann::json& tools,
                                const nlohmann::json& tool_choice) {
  std::vector<std::string> offered;
  if (tools.is_array()) {
    for (const auto& t : tools) {
      if (!t.is_object()) continue;
      const auto f = t.value("function", nlohmann::json::object());
      if (f.is_object() && f.contains("name") && f["name"].is_string()) offered.push_back(f["name"]);
    }
  }
  std::string forced;
  if (tool_choice.is_object()) forced = tool_choice.value("function", nlohmann::json::object()).value("name", "");
  const bool required = tool_choice == "required" || !forced.empty();
  if (calls.empty()) return required ? fail("a tool call was required and none was made") : QualityVerdict{true, ""};
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const ToolCall& c = calls[i];
    if (std::find(offered.begin(), offered.end(), c.name) == offered.end()) {
      return fail(fmt::format("call {} names '{}', which was not offered", i, printable_ascii(c.name, 64)));
    }
    if (!forced.empty() && c.name != forced) {
      return fail(fmt::format("call {} names '{}', but '{}' was asked for", i, printable_ascii(c.name, 64),
                              printable_ascii(forced, 64)));
    }
    auto args = nlohmann::json::parse(c.arguments, nullptr, false);
    if (args.is_discarded()) return fail(fmt::format("call {}'s arguments do not parse as JSON", i));
    if (!args.is_object()) return fail(fmt::format("call {}'s arguments are not a JSON object", i));
  }
  return {true, ""};
}

QualityVerdict check_length(std::uint64_t completion_tokens, std::uint64_t max_tokens, std::string_view finish_reason) {
  if (completion_tokens > max_tokens) {
    return fail(fmt::format("{} tokens exceed max_tokens {}", completion_tokens, max_tokens));
  }
  if (finish_reason == "length" && completion_tokens < max_tokens) {
    return fail(fmt::format("finish_reason is length after {} of {} tokens", completion_tokens, max_tokens));
  }
  if (finish_reason.empty()) return fail("the answer has no finish_reason");
  return {true, ""};
}

QualityVerdict check_expected(std::string_view answer, const nlohmann::json& expect) {
  if (!expect.is_object()) return fail("expect must be an object with answer or contains");
  if (auto a = expect.find("answer"); a != expect.end() && a->is_string()) {
    if (trim(answer) == trim(a->get_ref<const std::string&>())) return {true, ""};
    return fail("the answer differs from the expected one");
  }
  if (auto c = expect.find("contains"); c != expect.end() && c->is_string()) {
    if (answer.find(c->get_ref<const std::string&>()) != std::string_view::npos) return {true, ""};
    return fail("the answer does not contain the expected text");
  }
  return fail("expect must be an object with answer or contains");
}

}  // namespace capsweep

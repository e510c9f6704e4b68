#include "core/quality.hpp"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validator.hpp>

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

using json = nlohmann::json;

// Schema keywords whose value is a map of names to subschemas, and those whose value is a
// subschema or an array of them.
bool is_schema_map(std::string_view k) {
  return k == "properties" || k == "definitions" || k == "$defs" || k == "dependencies";
}
bool is_subschema(std::string_view k) {
  return k == "items" || k == "additionalItems" || k == "additionalProperties" || k == "not" || k == "if" ||
         k == "then" || k == "else" || k == "contains" || k == "propertyNames" || k == "allOf" || k == "anyOf" ||
         k == "oneOf";
}

json strip_regex(const json& schema, int depth) {
  if (depth > kMaxAnswerDepth) return json::object();
  if (schema.is_array()) {
    json out = json::array();
    for (const auto& s : schema) out.push_back(strip_regex(s, depth + 1));
    return out;
  }
  if (!schema.is_object()) return schema;
  json out = json::object();
  for (const auto& [k, v] : schema.items()) {
    if (k == "pattern" || k == "patternProperties" || k == "format") continue;
    if (is_schema_map(k) && v.is_object()) {
      json m = json::object();
      for (const auto& [name, sub] : v.items()) m[name] = strip_regex(sub, depth + 1);
      out[k] = std::move(m);
    } else if (is_subschema(k)) {
      out[k] = strip_regex(v, depth + 1);
    } else {
      out[k] = v;
    }
  }
  return out;
}

// A compiled RE2 pattern with a memory bound, or the reason it does not compile.
struct Pattern {
  std::unique_ptr<re2::RE2> re;
  std::string problem;
};
Pattern compile(const std::string& pattern) {
  re2::RE2::Options opts;
  opts.set_log_errors(false);
  opts.set_max_mem(8 << 20);
  Pattern p;
  if (pattern.size() > 4096) {
    p.problem = "the pattern is longer than 4096 characters";
    return p;
  }
  p.re = std::make_unique<re2::RE2>(pattern, opts);
  if (!p.re->ok()) p.problem = "the pattern does not compile: " + printable_ascii(p.re->error(), 200);
  return p;
}

}  // namespace

bool json_nesting_exceeds(std::string_view text, int max_depth) {
  int depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

json without_regex_keywords(const json& schema) {
  return strip_regex(schema, 0);
}

std::optional<std::string> schema_problem(const json& schema) {
  if (!schema.is_object()) return "must be a JSON Schema object";
  try {
    const json usable = without_regex_keywords(schema);
    valijson::Schema compiled;
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(usable);
    parser.populateSchema(adapter, compiled);
  } catch (const std::exception& e) {
    return "cannot be used: " + printable_ascii(e.what(), 200);
  }
  return std::nullopt;
}

QualityVerdict check_schema(const json& instance, const json& schema) {
  try {
    const json usable = without_regex_keywords(schema);
    valijson::Schema compiled;
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter schema_adapter(usable);
    parser.populateSchema(schema_adapter, compiled);
    valijson::Validator validator;
    valijson::ValidationResults results;
    valijson::adapters::NlohmannJsonAdapter target(instance);
    if (validator.validate(compiled, target, &results)) return {true, ""};
    valijson::ValidationResults::Error e;
    std::string where, what;
    if (results.popError(e)) {
      for (std::size_t i = 1; i < e.context.size(); ++i) where += e.context[i];
      what = e.description;
    }
    return fail(fmt::format("not valid against the schema{}{}",
                            where.empty() ? "" : " at " + printable_ascii(where, 120),
                            what.empty() ? "" : ": " + printable_ascii(what, 200)));
  } catch (const std::exception& e) {
    return fail("the schema cannot be used: " + printable_ascii(e.what(), 200));
  }
}

std::optional<nlohmann::json> answer_json(std::string_view answer) {
  if (json_nesting_exceeds(answer)) return std::nullopt;
  auto j = nlohmann::json::parse(trim(answer), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

QualityVerdict check_json_answer(std::string_view answer) {
  const std::string_view body = trim(answer);
  if (body.empty()) return fail("the answer is empty");
  if (json_nesting_exceeds(body)) return fail(fmt::format("the answer nests deeper than {} levels", kMaxAnswerDepth));
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
  if (tool_choice == "none") return fail("tool_choice was none, yet a tool was called");
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const ToolCall& c = calls[i];
    if (std::find(offered.begin(), offered.end(), c.name) == offered.end()) {
      return fail(fmt::format("call {} names '{}', which was not offered", i, printable_ascii(c.name, 64)));
    }
    if (!forced.empty() && c.name != forced) {
      return fail(fmt::format("call {} names '{}', but '{}' was asked for", i, printable_ascii(c.name, 64),
                              printable_ascii(forced, 64)));
    }
    if (json_nesting_exceeds(c.arguments)) return fail(fmt::format("call {}'s arguments nest too deep", i));
    auto args = nlohmann::json::parse(c.arguments, nullptr, false);
    if (args.is_discarded()) return fail(fmt::format("call {}'s arguments do not parse as JSON", i));
    if (!args.is_object()) return fail(fmt::format("call {}'s arguments are not a JSON object", i));
    const json params = tool_parameters(tools, c.name);
    if (params.is_object()) {
      if (auto v = check_schema(args, params); !v.ok)
        return fail(fmt::format("call {}'s arguments are {}", i, v.reason));
    }
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
  if (!expect.is_object()) return fail("expect must be an object with answer, contains or regex");
  if (auto a = expect.find("answer"); a != expect.end() && a->is_string()) {
    if (trim(answer) == trim(a->get_ref<const std::string&>())) return {true, ""};
    return fail("the answer differs from the expected one");
  }
  if (auto c = expect.find("contains"); c != expect.end() && c->is_string()) {
    if (answer.find(c->get_ref<const std::string&>()) != std::string_view::npos) return {true, ""};
    return fail("the answer does not contain the expected text");
  }
  if (auto r = expect.find("regex"); r != expect.end() && r->is_string()) {
    const Pattern p = compile(r->get<std::string>());
    if (!p.problem.empty()) return fail(p.problem);
    if (re2::RE2::PartialMatch(re2::StringPiece(answer.data(), answer.size()), *p.re)) return {true, ""};
    return fail("the answer does not match the expected pattern");
  }
  return fail("expect must be an object with answer, contains or regex");
}

std::optional<std::string> expect_problem(const nlohmann::json& expect) {
  if (!expect.is_object()) return "must be an object with answer, contains or regex";
  int given = 0;
  for (const char* k : {"answer", "contains", "regex"}) {
    auto it = expect.find(k);
    if (it == expect.end()) continue;
    if (!it->is_string()) return std::string(k) + " must be a string";
    ++given;
  }
  if (given == 0) return "must give answer, contains or regex";
  if (auto r = expect.find("regex"); r != expect.end()) {
    if (auto p = compile(r->get<std::string>()); !p.problem.empty()) return "regex: " + p.problem;
  }
  return std::nullopt;
}

}  // namespace capsweep

#include "llmsim/answers.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace capsweep::llmsim {

namespace {

using json = nlohmann::json;

std::uint64_t step_seed(std::uint64_t seed, std::uint64_t k) {
  std::uint64_t x = seed + 0x9e3779b97f4a7c15ull * (k + 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string word(std::uint64_t seed) {
  return std::string(token_text(seed, 0).substr(1));  // without its leading space
}

// The first type a schema names ("null" last, as a model would rather answer something).
std::string type_of(const json& schema) {
  const json t = schema.value("type", json());
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& x : t)
      if (x.is_string() && x != "null") return x.get<std::string>();
    return "null";
  }
  if (schema.contains("properties")) return "object";
  if (schema.contains("items")) return "array";
  return "string";
}

double number_in(const json& schema, double preferred) {
  double v = preferred;
  if (auto lo = schema.find("minimum"); lo != schema.end() && lo->is_number()) v = std::max(v, lo->get<double>());
  if (auto lo = schema.find("exclusiveMinimum"); lo != schema.end() && lo->is_number())
    v = std::max(v, lo->get<double>() + 1);
  if (auto hi = schema.find("maximum"); hi != schema.end() && hi->is_number()) v = std::min(v, hi->get<double>());
  if (auto hi = schema.find("exclusiveMaximum"); hi != schema.end() && hi->is_number())
    v = std::min(v, hi->get<double>() - 1);
  return v;
}

// Whether a fault of probability `rate` strikes this request. A model's faults are its own:
// the same prompt at temperature 0 (or with a seed) gets the same answer, broken or not, so
// the draw comes from the request's text seed; a sampled request draws afresh.
bool strikes(double rate, const CompletionRequest& req, Rng& rng, std::uint64_t salt) {
  if (!(rate > 0)) return false;
  if (req.sampled) return rng.uniform01() < rate;
  return static_cast<double>(step_seed(req.text_seed, salt) >> 11) * 0x1.0p-53 < rate;
}

// A JSON object answer to a json_object request.
json object_answer(std::uint64_t seed) {
  std::string text;
  for (std::uint64_t k = 0; k < 4; ++k) text += (k ? " " : "") + word(step_seed(seed, k));
  return {{"answer", text}, {"confidence", static_cast<double>(step_seed(seed, 9) % 100) / 100.0}};
}

// A JSON text broken the way models break it: cut short, or wrapped in a code fence.
std::string corrupt_json(const std::string& text, std::uint64_t seed) {
  if (step_seed(seed, 77) % 2 == 0) return "```json\n" + text + "\n```";
  return text.substr(0, text.size() > 2 ? text.size() - 2 : 0);
}

// The tool a request's tool_choice asks for, else the first offered; "" when none may be called.
const json* chosen_tool(const json& tools, const json& tool_choice) {
  if (!tools.is_array() || tools.empty() || tool_choice == "none") return nullptr;
  std::string forced;
  if (tool_choice.is_object()) forced = tool_choice.value("function", json::object()).value("name", "");
  for (const auto& t : tools) {
    const json f = t.is_object() ? t.value("function", json()) : json();
    if (!f.is_object() || !f.value("name", json()).is_string()) continue;
    if (forced.empty() || f["name"] == forced) return &t;
  }
  return nullptr;
}

void script_tool_call(CompletionRequest& req, const json& tool, const SimConfig& cfg, Rng& rng) {
  const json f = tool["function"];
  std::string name = f["name"].get<std::string>();
  std::string arguments = instance_of(f.value("parameters", json::object()), req.text_seed).dump();
  if (strikes(cfg.tool_call_corrupt_rate, req, rng, 2)) {
    if (step_seed(req.text_seed, 78) % 2 == 0)
      name += "_v2";  // a tool nobody offered
    else
      arguments = arguments.substr(0, arguments.size() - 1);  // arguments cut short
  }
  req.script.tool_call = true;
  req.script.tool_name = std::move(name);
  req.script.pieces = token_pieces(arguments);
  req.script.finish_reason = "tool_calls";
}

}  // namespace

std::vector<std::string> token_pieces(std::string_view text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size(); i += 4) out.emplace_back(text.substr(i, 4));
  if (out.empty()) out.emplace_back();
  return out;
}

std::optional<long long> arithmetic_answer(std::string_view text) {
  auto integer_at = [&](std::size_t& i) -> std::optional<long long> {
    const std::size_t start = i;
    long long v = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) && i - start < 12) {
      v = v * 10 + (text[i] - '0');
      ++i;
    }
    if (i == start) return std::nullopt;
    return v;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i])) ||
        (i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1]))))
      continue;
    std::size_t j = i;
    const auto a = integer_at(j);
    while (j < text.size() && text[j] == ' ') ++j;
    if (j >= text.size()) return std::nullopt;
    const char op = text[j];
    if (op != '+' && op != '-' && op != '*' && op != 'x') continue;
    ++j;
    while (j < text.size() && text[j] == ' ') ++j;
    const auto b = integer_at(j);
    if (!a || !b) continue;
    return op == '+' ? *a + *b : op == '-' ? *a - *b : *a * *b;
  }
  return std::nullopt;
}

json instance_of(const json& schema, std::uint64_t seed, int depth) {
  if (!schema.is_object() || depth > 16) return json::object();
  if (auto c = schema.find("const"); c != schema.end()) return *c;
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array() && !e->empty()) return (*e)[0];
  for (const char* k : {"anyOf", "oneOf", "allOf"}) {
    if (auto it = schema.find(k); it != schema.end() && it->is_array() && !it->empty()) {
      return instance_of((*it)[0], seed, depth + 1);
    }
  }
  const std::string type = type_of(schema);
  if (type == "object") {
    json out = json::object();
    const json props = schema.value("properties", json::object());
    std::uint64_t k = 0;
    if (props.is_object()) {
      for (const auto& [name, sub] : props.items()) out[name] = instance_of(sub, step_seed(seed, ++k), depth + 1);
    }
    return out;
  }
  if (type == "array") {
    const std::size_t n = std::max<std::size_t>(1, schema.value("minItems", std::size_t{1}));
    const std::size_t most = schema.value("maxItems", std::size_t{n});
    json out = json::array();
    for (std::size_t i = 0; i < std::min(n, most) && i < 64; ++i) {
      out.push_back(instance_of(schema.value("items", json::object()), step_seed(seed, i), depth + 1));
    }
    return out;
  }
  if (type == "integer") return static_cast<long long>(number_in(schema, static_cast<double>(1 + seed % 100)));
  if (type == "number") return number_in(schema, static_cast<double>(seed % 1000) / 10.0);
  if (type == "boolean") return seed % 2 == 0;
  if (type == "null") return nullptr;
  std::string text = word(seed);
  const std::size_t min_length = schema.value("minLength", std::size_t{0});
  while (text.size() < min_length) text += text;
  if (auto most = schema.find("maxLength"); most != schema.end() && most->is_number_unsigned()) {
    text = text.substr(0, std::max<std::size_t>(min_length, most->get<std::size_t>()));
  }
  return text;
}

void script_answer(CompletionRequest& req, const SimConfig& cfg, Rng& rng) {
  if (req.sampled) req.text_seed ^= rng.engine()();  // temperature > 0 and no seed: a new text each time
  if (cfg.nondeterminism_rate > 0 && rng.uniform01() < cfg.nondeterminism_rate) req.text_seed ^= rng.engine()();
  if (strikes(cfg.overrun_max_tokens_rate, req, rng, 3)) {
    req.reported_tokens_extra = static_cast<std::uint32_t>(1 + step_seed(req.text_seed, 79) % 8);
  }
  if (const json* tool = chosen_tool(req.tools, req.tool_choice)) {
    script_tool_call(req, *tool, cfg, rng);
    return;
  }
  const std::string format = req.response_format.is_object() ? req.response_format.value("type", "") : "";
  std::string text;
  bool structured = false;
  if (format == "json_object") {
    text = object_answer(req.text_seed).dump();
    structured = true;
  } else if (format == "json_schema") {
    const json spec = req.response_format.value("json_schema", json::object());
    text = instance_of(spec.is_object() ? spec.value("schema", json::object()) : json::object(), req.text_seed).dump();
    structured = true;
  } else if (auto result = arithmetic_answer(req.question)) {
    if (strikes(cfg.wrong_answer_rate, req, rng, 4)) ++*result;
    text = std::to_string(*result);
  } else {
    return;  // the word stream
  }
  if (structured && strikes(cfg.json_corrupt_rate, req, rng, 1)) text = corrupt_json(text, req.text_seed);
  req.script.pieces = token_pieces(text);
}

}  // namespace capsweep::llmsim

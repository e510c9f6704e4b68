#include "api/schema.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

#include "core/schedule.hpp"
#include "llm/api_table.hpp"
#include "llm/session_shapes.hpp"
#include "llm/workload.hpp"
#include "sweep/kinds.hpp"

namespace capsweep::api {

// The schema files compiled in from schema/ (cmake/embed.cmake).
std::vector<std::pair<std::string_view, std::string_view>> schema_files();

namespace {

using json = nlohmann::json;

// "[target]" -> "target", "[3]" -> "3"; "<root>" is dropped. Escapes per RFC 6901.
std::string pointer_of(const std::vector<std::string>& context) {
  std::string out;
  for (const auto& part : context) {
    if (part.size() < 2 || part.front() != '[' || part.back() != ']') continue;
    std::string token = part.substr(1, part.size() - 2);
    std::string escaped;
    for (char c : token) {
      if (c == '~')
        escaped += "~0";
      else if (c == '/')
        escaped += "~1";
      else
        escaped += c;
    }
    out += "/" + escaped;
  }
  return out;
}

// Messages about a property of the object in context point one level deeper, with a
// plainer message: {field suffix, message}.
std::pair<std::string, std::string> refine(const std::string& description) {
  static const std::regex required("Missing required property '([^']+)'");
  static const std::regex unknown(
      "could not be validated using 'properties' or 'additionalProperties' constraints: '([^']+)'");
  std::smatch m;
  if (std::regex_search(description, m, required)) return {"/" + m[1].str(), "is required"};
  if (std::regex_search(description, m, unknown)) return {"/" + m[1].str(), "is not a known field here"};
  if (description.find("'type' constraint") != std::string::npos) return {"", "has the wrong type for this field"};
  if (description.find("enum values") != std::string::npos) return {"", "is not one of the allowed values"};
  if (description.find("'pattern' constraint") != std::string::npos) return {"", "does not have the required form"};
  std::string message = description;
  if (!message.empty() && message.back() == '.') message.pop_back();
  return {"", message};
}

void fill(const json& schema, json& instance, const json& root) {
  const json* s = &schema;
  if (auto ref = s->find("$ref"); ref != s->end() && ref->is_string()) {
    const std::string r = ref->get<std::string>();
    if (r.rfind("#/", 0) == 0) {
      try {
        s = &root.at(json::json_pointer(r.substr(1)));
      } catch (const json::exception&) {
        return;
      }
    }
  }
  if (!instance.is_object()) return;
  auto props = s->find("properties");
  if (props == s->end() || !props->is_object()) return;
  for (const auto& [name, sub] : props->items()) {
    if (!instance.contains(name)) {
      if (auto d = sub.find("default"); d != sub.end())
        instance[name] = *d;
      else
        continue;
    }
    fill(sub, instance[name], root);
  }
}

}  // namespace

struct SchemaValidator::Impl {
  valijson::Schema schema;
};

SchemaValidator::SchemaValidator(const json& schema) : doc_(schema), impl_(std::make_unique<Impl>()) {
  try {
    valijson::SchemaParser parser(valijson::SchemaParser::kDraft7);
    valijson::adapters::NlohmannJsonAdapter adapter(doc_);
    parser.populateSchema(adapter, impl_->schema);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("bad JSON schema: ") + e.what());
  }
}

SchemaValidator::~SchemaValidator() = default;
SchemaValidator::SchemaValidator(SchemaValidator&&) noexcept = default;
SchemaValidator& SchemaValidator::operator=(SchemaValidator&&) noexcept = default;

Result<void> SchemaValidator::validate(const json& instance) const {
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter target(instance);
  if (validator.validate(impl_->schema, target, &results)) return {};
  // The deepest error is the most specific one; one that names a property of its object (an
  // unknown or a missing key) points one level deeper than the object, so it wins over the
  // object's own complaint ("no more than 1 properties" when the extra key is a typo).
  valijson::ValidationResults::Error error;
  std::string best_field, best_message;
  std::size_t best_depth = 0;
  bool have = false;
  while (results.popError(error)) {
    auto [suffix, message] = refine(error.description);
    const std::size_t depth = error.context.size() + (suffix.empty() ? 0 : 1);
    if (!have || depth > best_depth) {
      best_field = pointer_of(error.context) + suffix;
      best_message = std::move(message);
      best_depth = depth;
      have = true;
    }
  }
  return invalid(best_field, best_message);
}

void SchemaValidator::apply_defaults(json& instance) const {
  fill(doc_, instance, doc_);
}

namespace {

// workload.sessions: the shape's enum is the table's names; each row's own fields join the
// block's properties (its row's check refuses them under another shape).
void add_session_shapes(json& properties) {
  properties["shape"]["enum"] = llm::session_shape_names();
  for (const std::string& name : llm::session_shape_names()) {
    const std::string& own = llm::session_shape_row(*llm::parse_session_shape(name)).schema_properties;
    if (own.empty()) continue;
    const json fields = json::parse(own);
    for (const auto& [key, schema] : fields.items()) properties[key] = schema;
  }
}

}  // namespace

json job_spec_schema() {
  json s = embedded_schema("sweep-spec.schema.json");
  s["properties"]["arrival"]["properties"]["process"]["enum"] = arrival_process_names();
  s["definitions"]["target"]["properties"]["api"]["enum"] = llm::api_names();
  // Each API row's count of items per request (embeddings' inputs_per_request, ...).
  for (const std::string& name : llm::api_names()) {
    const std::string& key = llm::api_row(*llm::parse_api(name)).items_key;
    json& items = s["properties"]["workload"]["properties"];
    if (key.empty() || items.contains(key)) continue;
    items[key] = {{"oneOf", json::array({{{"type", "integer"}, {"minimum", 1}, {"maximum", llm::kMaxItemsPerRequest}},
                                         {{"$ref", "#/definitions/length"}}})},
                  {"description", fmt::format("The items of each request of a {} target (a count or a length "
                                              "distribution, each of prompt_tokens; 1 when absent).",
                                              name)}};
  }
  add_session_shapes(s["properties"]["workload"]["properties"]["sessions"]["properties"]);
  json& names = s["properties"]["kind"]["enum"];
  for (sweep::JobKind k : sweep::all_kinds()) {
    const sweep::KindRules& r = sweep::rules(k);
    if (std::find(names.begin(), names.end(), r.name) == names.end()) names.push_back(r.name);
    for (const auto& [block, schema] : r.block_schemas.items()) s["properties"][block] = schema;
  }
  return s;
}

std::string_view embedded_schema_text(std::string_view file_name) {
  for (const auto& [name, text] : schema_files()) {
    if (name == file_name) return text;
  }
  throw std::out_of_range("no embedded schema " + std::string(file_name));
}

const json& embedded_schema(std::string_view file_name) {
  static std::mutex mutex;
  static std::map<std::string, json, std::less<>> cache;
  std::lock_guard lock(mutex);
  if (auto it = cache.find(file_name); it != cache.end()) return it->second;
  auto [it, _] = cache.emplace(std::string(file_name), json::parse(embedded_schema_text(file_name)));
  return it->second;
}

}  // namespace capsweep::api

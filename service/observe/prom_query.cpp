#include "observe/prom_query.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/text.hpp"

namespace capsweep::observe {

namespace {

using json = nlohmann::json;

// A sample's value: Prometheus writes it as a string ("12", "NaN", "+Inf").
std::optional<double> sample_value(const json& pair) {
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_string()) return std::nullopt;
  const std::string& s = pair[1].get_ref<const std::string&>();
  try {
    std::size_t used = 0;
    const double v = std::stod(s, &used);
    if (used != s.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

Result<PromSource> parse_prom_source(const json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "must be an object {\"url\", \"queries\"}");
  PromSource out;
  auto url = j.find("url");
  if (url == j.end() || !url->is_string() || url->get_ref<const std::string&>().empty()) {
    return invalid(field + "/url", "is required: the Prometheus server, like http://127.0.0.1:9090");
  }
  out.url = url->get<std::string>();
  auto queries = j.find("queries");
  if (queries == j.end() || !queries->is_object() || queries->empty()) {
    return invalid(field + "/queries",
                   "is required: PromQL for at least one of running, waiting, kv_cache, "
                   "prompt_tokens, generation_tokens");
  }
  for (const auto& [name, q] : queries->items()) {
    if (std::find(kPromGauges.begin(), kPromGauges.end(), name) == kPromGauges.end()) {
      return invalid(field + "/queries/" + printable_ascii(name, 64),
                     "unknown gauge (expected running, waiting, kv_cache, prompt_tokens or generation_tokens)");
    }
    if (!q.is_string() || q.get_ref<const std::string&>().empty() || q.get_ref<const std::string&>().size() > 4000) {
      return invalid(field + "/queries/" + name, "must be a PromQL expression of 1 to 4000 characters");
    }
    out.queries[name] = q.get<std::string>();
  }
  return out;
}

std::string instant_query_path(std::string_view base_path, std::string_view promql) {
  std::string out(base_path);
  while (!out.empty() && out.back() == '/') out.pop_back();
  out += "/api/v1/query?query=" + percent_encode(promql);
  return out;
}

Result<std::optional<double>> parse_instant_query(std::string_view body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("status") || !j["status"].is_string()) {
    return Error{errc::parse_error, "not a Prometheus API answer", ""};
  }
  if (j["status"] != "success") {
    const std::string type = j.value("errorType", "error"), message = j.value("error", "");
    return Error{errc::invalid_argument,
                 fmt::format("Prometheus: {}: {}", printable_ascii(type, 40), printable_ascii(message, 300)), ""};
  }
  const json& data = j.value("data", json::object());
  const std::string type = data.value("resultType", "");
  const json& result = data.value("result", json());
  if (type == "scalar") {
    auto v = sample_value(result);
    if (!v) return Error{errc::parse_error, "Prometheus answered a scalar without a number", ""};
    return std::optional<double>(*v);
  }
  if (type != "vector" || !result.is_array()) {
    return Error{errc::parse_error,
                 fmt::format("the query must give an instant vector or a scalar, not '{}'", printable_ascii(type, 20)),
                 ""};
  }
  if (result.empty()) return std::optional<double>();
  double sum = 0;
  for (const auto& sample : result) {
    auto v = sample_value(sample.value("value", json()));
    if (!v) return Error{errc::parse_error, "Prometheus answered a sample without a number", ""};
    sum += *v;
  }
  return std::optional<double>(sum);
}

}  // namespace capsweep::observe

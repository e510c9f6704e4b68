#include "llm/target.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <charconv>

#include "core/fields.hpp"
#include "core/random.hpp"

namespace capsweep::llm {

std::uint16_t Target::model_for(std::uint64_t seed, std::uint64_t unit) const noexcept {
  if (models.size() < 2) return 0;
  double total = 0;
  for (const ModelShare& m : models) total += m.weight;
  // A uniform draw in [0, total) from the seed and the unit alone: the same on every agent.
  const std::uint64_t bits = splitmix64(seed ^ 0x6d6f64656cULL ^ splitmix64(unit + 1)) >> 11;
  double x = static_cast<double>(bits) * 0x1.0p-53 * total;
  for (std::size_t i = 0; i + 1 < models.size(); ++i) {
    if (x < models[i].weight) return static_cast<std::uint16_t>(i);
    x -= models[i].weight;
  }
  return static_cast<std::uint16_t>(models.size() - 1);
}

Target Target::at_replica(std::size_t k) const {
  Target t = *this;
  if (k >= replicas.size()) return t;
  const Replica& r = replicas[k];
  t.scheme = r.scheme;
  t.host = r.host;
  t.port = r.port;
  t.base_path = r.base_path;
  t.replicas.clear();
  return t;
}

std::vector<std::string> Target::replica_urls() const {
  std::vector<std::string> out;
  if (replicas.size() < 2) return out;
  for (const Replica& r : replicas) out.push_back(r.url);
  return out;
}

std::string Target::completion_path() const {
  return base_path + (path.empty() ? api_row(api).path : path);
}

Result<Target> parse_base_url(Target t, std::string_view url, const std::string& field) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) {
    return invalid(field, fmt::format("'{}' is not a URL like http://host:port", url));
  }
  t.scheme = std::string(url.substr(0, scheme_end));
  if (t.scheme != "http" && t.scheme != "https") {
    return invalid(field, fmt::format("scheme '{}' is not http or https", t.scheme));
  }
  std::string_view rest = url.substr(scheme_end + 3);
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.find_first_of("?#") != std::string_view::npos) {
    return invalid(field, "the base URL must not carry a query or fragment");
  }
  t.base_path = std::string(path);
  if (authority.find('@') != std::string_view::npos) {
    return invalid(field, "credentials in the URL are not accepted: use target.headers");
  }
  std::string_view host = authority, port_text;
  if (!authority.empty() && authority.front() == '[') {  // [v6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return invalid(field, "unterminated IPv6 address");
    host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return invalid(field, "expected ':' after the IPv6 address");
      port_text = authority.substr(close + 2);
    }
  } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port_text = authority.substr(colon + 1);
  }
  if (host.empty()) return invalid(field, "the URL has no host");
  t.host = std::string(host);
  if (port_text.empty()) {
    t.port = t.tls() ? 443 : 80;
  } else {
    unsigned port = 0;
    auto [p, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || p != port_text.data() + port_text.size() || port == 0 || port > 65535) {
      return invalid(field, fmt::format("'{}' is not a port number", port_text));
    }
    t.port = static_cast<std::uint16_t>(port);
  }
  return t;
}

namespace {

// target.headers: names without separators, values without line breaks.
std::optional<Error> parse_headers(const nlohmann::json& j, const std::string& field, Target& t) {
  if (auto h = j.find("headers"); h != j.end()) {
    if (!h->is_object()) return invalid(field + "/headers", "must be an object of header names to strings");
    for (const auto& [k, v] : h->items()) {
      if (!v.is_string()) return invalid(field + "/headers/" + k, "must be a string");
      if (k.empty() || k.find_first_of(" :\r\n") != std::string::npos)
        return invalid(field + "/headers/" + k, "is not a header name");
      const auto& s = v.get_ref<const std::string&>();
      if (s.find_first_of("\r\n") != std::string::npos)
        return invalid(field + "/headers/" + k, "must not contain line breaks");
      t.headers.emplace_back(k, s);
    }
  }
  return std::nullopt;
}

// target.models: [{"name", "weight" (1)}], 1 to 16 distinct names, weights > 0.
std::optional<Error> parse_model_list(const nlohmann::json& list, const std::string& field, Target& t) {
  if (!list.is_array() || list.empty() || list.size() > 16)
    return invalid(field, "must be a list of 1 to 16 models: [{\"name\", \"weight\"}]");
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = fmt::format("{}/{}", field, i);
    const nlohmann::json& m = list[i];
    if (!m.is_object()) return invalid(at, "must be an object {\"name\", \"weight\"}");
    if (auto e = fields::known_keys(m, {"name", "weight"}, at, "field of a model")) return e;
    const auto name = m.find("name");
    if (name == m.end() || !name->is_string() || name->get<std::string>().empty() ||
        name->get<std::string>().size() > 500)
      return invalid(at + "/name", "is required: a served model's name (at most 500 bytes)");
    ModelShare share{name->get<std::string>(), 1};
    if (auto w = m.find("weight"); w != m.end()) {
      if (!w->is_number() || !(w->get<double>() > 0) || w->get<double>() > 1e6)
        return invalid(at + "/weight", "must be a number in (0, 1000000]");
      share.weight = w->get<double>();
    }
    for (const ModelShare& before : t.models) {
      if (before.name == share.name) return invalid(at + "/name", fmt::format("'{}' is listed twice", share.name));
    }
    t.models.push_back(std::move(share));
  }
  return std::nullopt;
}

// target.model, or target.models (the first of them is `model`): one of the two.
std::optional<Error> parse_models(const nlohmann::json& j, const std::string& field, Target& t) {
  const auto model = j.find("model");
  const auto models = j.find("models");
  if (models != j.end()) {
    if (model != j.end()) return invalid(field + "/models", "give model or models, not both");
    if (auto e = parse_model_list(*models, field + "/models", t)) return e;
    t.model = t.models.front().name;
    return std::nullopt;
  }
  if (model == j.end() || !model->is_string() || model->get<std::string>().empty()) {
    return invalid(field + "/model", "is required: the served model name (or models: a list)");
  }
  t.model = model->get<std::string>();
  return std::nullopt;
}

// target.base_urls: 1 to kMaxReplicas distinct URLs, each parsed alone.
std::optional<Error> parse_replicas(const nlohmann::json& list, const std::string& field, Target& t) {
  if (!list.is_array() || list.empty() || list.size() > kMaxReplicas) {
    return invalid(field, fmt::format("must be a list of 1 to {} URLs like http://127.0.0.1:8000", kMaxReplicas));
  }
  for (std::size_t k = 0; k < list.size(); ++k) {
    const std::string f = fmt::format("{}/{}", field, k);
    if (!list[k].is_string()) return invalid(f, "must be a URL like http://127.0.0.1:8000");
    const std::string url = list[k].get<std::string>();
    auto one = parse_base_url(Target{}, url, f);
    if (!one) return one.error();
    for (const Replica& r : t.replicas) {
      if (r.scheme == one->scheme && r.host == one->host && r.port == one->port && r.base_path == one->base_path)
        return invalid(f, fmt::format("names the replica {} again", r.url));
    }
    t.replicas.push_back({url, one->scheme, one->host, one->port, one->base_path});
  }
  return std::nullopt;
}

// target.base_url, or target.base_urls (the replicas) with target.balance.
std::optional<Error> parse_urls(const nlohmann::json& j, const std::string& field, Target& t) {
  const auto url = j.find("base_url");
  const auto urls = j.find("base_urls");
  if (urls != j.end()) {
    if (url != j.end()) return invalid(field + "/base_urls", "give base_url or base_urls, not both");
    if (auto e = parse_replicas(*urls, field + "/base_urls", t)) return e;
    const Replica& first = t.replicas.front();
    t.scheme = first.scheme;
    t.host = first.host;
    t.port = first.port;
    t.base_path = first.base_path;
  } else {
    if (url == j.end() || !url->is_string())
      return invalid(field + "/base_url", "is required: a URL like http://127.0.0.1:8000 (or base_urls: a list)");
    auto parsed = parse_base_url(t, url->get<std::string>(), field + "/base_url");
    if (!parsed) return parsed.error();
    t = std::move(*parsed);
  }
  if (auto b = j.find("balance"); b != j.end()) {
    const std::string s = b->is_string() ? b->get<std::string>() : std::string();
    if (s != "round_robin" && s != "least_in_flight")
      return invalid(field + "/balance", "must be round_robin or least_in_flight");
    t.balance = s == "round_robin" ? Balance::round_robin : Balance::least_in_flight;
  }
  return std::nullopt;
}

// target.extra_body: merged into every request body, but never over a field that defines the load.
std::optional<Error> parse_extra_body(const nlohmann::json& j, const std::string& field, Target& t) {
  if (auto e = j.find("extra_body"); e != j.end()) {
    if (!e->is_object()) return invalid(field + "/extra_body", "must be an object");
    // Fields that define the load (how many answers, how long, to what, in which form) are
    // set by the spec; overriding them would multiply the load past the service's limits or
    // measure something else than the spec says.
    static constexpr std::array<std::string_view, 17> kLoadFields{"model",
                                                                  "prompt",
                                                                  "messages",
                                                                  "stream",
                                                                  "stream_options",
                                                                  "max_tokens",
                                                                  "max_completion_tokens",
                                                                  "n",
                                                                  "best_of",
                                                                  "ignore_eos",
                                                                  "min_tokens",
                                                                  "use_beam_search",
                                                                  "echo",
                                                                  "logprobs",
                                                                  "input",
                                                                  "max_output_tokens",
                                                                  "previous_response_id"};
    const auto& own = api_row(t.api).own_fields;
    for (const auto& [k, v] : e->items()) {
      if (std::find(kLoadFields.begin(), kLoadFields.end(), k) != kLoadFields.end() ||
          std::find(own.begin(), own.end(), k) != own.end()) {
        return invalid(field + "/extra_body/" + k,
                       "defines the load and may not be overridden in extra_body; set it through the spec");
      }
    }
    t.extra_body = *e;
  }
  return std::nullopt;
}

// target.tls and target.timeouts.
std::optional<Error> parse_connection(const nlohmann::json& j, const std::string& field, Target& t) {
  if (auto tls = j.find("tls"); tls != j.end()) {
    if (!tls->is_object()) return invalid(field + "/tls", "must be an object");
    if (auto v = tls->find("verify"); v != tls->end()) {
      if (!v->is_boolean()) return invalid(field + "/tls/verify", "must be true or false");
      t.verify_tls = v->get<bool>();
    }
    if (auto ca = tls->find("ca_file"); ca != tls->end()) {
      if (!ca->is_string()) return invalid(field + "/tls/ca_file", "must be a path");
      t.ca_file = ca->get<std::string>();
    }
  }
  if (auto to = j.find("timeouts"); to != j.end()) {
    if (!to->is_object()) return invalid(field + "/timeouts", "must be an object");
    auto c = fields::seconds(*to, "connect_s", field + "/timeouts", t.connect_timeout);
    if (!c) return c.error();
    auto r = fields::seconds(*to, "read_s", field + "/timeouts", t.read_timeout);
    if (!r) return r.error();
    auto q = fields::seconds(*to, "request_s", field + "/timeouts", t.request_timeout);
    if (!q) return q.error();
    t.connect_timeout = *c;
    t.read_timeout = *r;
    t.request_timeout = *q;
  }
  return std::nullopt;
}

}  // namespace

Result<Target> parse_target(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "must be an object");
  Target t;
  if (auto e = parse_urls(j, field, t)) return *e;
  if (auto api = j.find("api"); api != j.end()) {
    const auto named = api->is_string() ? parse_api(api->get<std::string>()) : std::nullopt;
    if (!named) return invalid(field + "/api", fmt::format("must be one of: {}", fmt::join(api_names(), ", ")));
    t.api = *named;
  }
  if (auto p = j.find("path"); p != j.end()) {
    const std::string s = p->is_string() ? p->get<std::string>() : std::string();
    const bool ok =
        s.size() > 1 && s.size() <= 256 && s.front() == '/' && s.find_first_of("?# ") == std::string::npos &&
        std::none_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
    if (!ok) return invalid(field + "/path", "must be a path from '/' (e.g. \"/rerank\"), at most 256 bytes, no query");
    t.path = p->get<std::string>();
  }
  if (auto e = parse_models(j, field, t)) return *e;
  if (auto e = parse_headers(j, field, t)) return *e;
  if (auto e = parse_extra_body(j, field, t)) return *e;
  for (const char* key : {"stream", "ignore_eos"}) {
    if (auto b = j.find(key); b != j.end()) {
      if (!b->is_boolean()) return invalid(field + "/" + key, "must be true or false");
      (std::string_view(key) == "stream" ? t.stream : t.ignore_eos) = b->get<bool>();
    }
  }
  if (auto e = parse_connection(j, field, t)) return *e;
  if (!api_row(t.api).generates) {
    // Its answers are whole, whatever `stream` says (the schema's default is true): nothing is
    // streamed, and nothing generated to ignore EOS on.
    t.stream = false;
    t.ignore_eos = false;
  }
  return t;
}

std::string completion_body(const Target& t, std::string_view prompt, std::uint32_t max_tokens,
                            std::string_view messages, std::optional<std::string_view> continues) {
  return request_body(t, RequestText{.prompt = prompt, .messages = messages, .max_tokens = max_tokens}, continues);
}

std::string request_body(const Target& t, const RequestText& text, std::optional<std::string_view> continues) {
  nlohmann::json j = t.extra_body;
  j["model"] = text.model.empty() ? std::string_view(t.model) : text.model;
  const ApiRow& row = api_row(t.api);
  row.request(j, text);
  if (continues && row.keep_state) row.keep_state(j, *continues);
  if (!row.generates) return j.dump();
  j["stream"] = t.stream;
  if (t.stream && row.stream_usage_option) {
    j["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  }
  if (t.ignore_eos) j["ignore_eos"] = true;
  return j.dump();
}

}  // namespace capsweep::llm

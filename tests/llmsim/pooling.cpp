#include "llmsim/pooling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/random.hpp"
#include "core/text.hpp"

namespace capsweep::llmsim {

namespace {

using json = nlohmann::json;

constexpr std::size_t kDimensions = 32;     // an embedding's length
constexpr std::size_t kMaxItems = 100'000;  // inputs or documents per request

std::optional<PoolingRequest> fail(ApiError& error, std::string param, std::string message, unsigned status = 400) {
  error = {status, std::move(message), status == 404 ? "NotFoundError" : "BadRequestError", std::move(param)};
  return std::nullopt;
}

// One text's tokens (its words), mixed into `seed`; nullopt for an empty one.
std::optional<std::uint32_t> text_tokens(const json& v, std::uint64_t& seed) {
  if (!v.is_string()) return std::nullopt;
  const auto& s = v.get_ref<const std::string&>();
  for (unsigned char c : s) seed = (seed ^ c) * 1099511628211ull;
  const std::uint32_t n = count_words(s);
  return n > 0 ? std::optional<std::uint32_t>(n) : std::nullopt;
}

// One input of an embeddings request: a text or a list of token ids.
std::optional<std::uint32_t> input_tokens(const json& v, std::uint64_t& seed) {
  if (!v.is_array()) return text_tokens(v, seed);
  if (v.empty()) return std::nullopt;
  for (const json& t : v) {
    if (!t.is_number_unsigned()) return std::nullopt;
    seed = splitmix64(seed ^ t.get<std::uint64_t>());
  }
  return static_cast<std::uint32_t>(v.size());
}

bool read_embeddings(const json& j, PoolingRequest& req, ApiError& error) {
  const auto input = j.find("input");
  if (input == j.end()) return fail(error, "input", "'input' is required"), false;
  // One text or one token list is a single input; otherwise each element is one.
  const bool single = input->is_string() || (input->is_array() && !input->empty() && (*input)[0].is_number());
  const json items = single ? json::array({*input}) : *input;
  if (!items.is_array() || items.empty() || items.size() > kMaxItems) {
    return fail(error, "input", "'input' must be a text, token ids, or a non-empty list of them"), false;
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto n = input_tokens(items[i], req.text_seed);
    if (!n) return fail(error, "input", fmt::format("input {} is empty or not a text or token ids", i)), false;
    req.sequences.push_back(*n);
  }
  if (auto f = j.find("encoding_format"); f != j.end()) {
    if (!f->is_string() || (*f != "float" && *f != "base64")) {
      return fail(error, "encoding_format", "'encoding_format' must be \"float\" or \"base64\""), false;
    }
    req.base64 = *f == "base64";
  }
  return true;
}

bool read_rerank(const json& j, PoolingRequest& req, ApiError& error) {
  const auto query = j.find("query");
  const auto q = query == j.end() ? std::nullopt : text_tokens(*query, req.text_seed);
  if (!q) return fail(error, "query", "'query' must be a non-empty text"), false;
  const auto docs = j.find("documents");
  if (docs == j.end() || !docs->is_array() || docs->empty() || docs->size() > kMaxItems) {
    return fail(error, "documents", "'documents' must be a non-empty list of texts"), false;
  }
  for (std::size_t i = 0; i < docs->size(); ++i) {
    const json& d = (*docs)[i];
    const auto n = text_tokens(d.is_object() && d.contains("text") ? d["text"] : d, req.text_seed);
    if (!n) return fail(error, "documents", fmt::format("document {} is empty or not a text", i)), false;
    req.sequences.push_back(*q + *n);  // a cross-encoder reads the query with each document
  }
  req.top_n = docs->size();
  if (auto t = j.find("top_n"); t != j.end() && !t->is_null()) {
    if (!t->is_number_unsigned() || t->get<std::uint64_t>() < 1)
      return fail(error, "top_n", "'top_n' must be >= 1"), false;
    req.top_n = std::min<std::size_t>(req.top_n, t->get<std::size_t>());
  }
  return true;
}

// Four bytes per float, little-endian, in base64.
std::string base64_floats(const std::vector<float>& v) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(v.size() * 4, '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

json embeddings_answer(const PoolingRequest& req, std::string_view id) {
  json data = json::array();
  for (std::size_t i = 0; i < req.sequences.size(); ++i) {
    Rng rng(splitmix64(req.text_seed ^ (i + 1)));
    std::vector<float> v(kDimensions);
    for (float& x : v) x = static_cast<float>(rng.uniform01() * 2 - 1);
    data.push_back(
        {{"index", i}, {"object", "embedding"}, {"embedding", req.base64 ? json(base64_floats(v)) : json(v)}});
  }
  return {{"id", id},
          {"object", "list"},
          {"model", req.model},
          {"data", std::move(data)},
          {"usage", {{"prompt_tokens", req.prompt_tokens}, {"total_tokens", req.prompt_tokens}}}};
}

json rerank_answer(const PoolingRequest& req, std::string_view id) {
  std::vector<std::pair<double, std::size_t>> scored;
  for (std::size_t i = 0; i < req.sequences.size(); ++i) {
    Rng rng(splitmix64(req.text_seed ^ (i + 1)));
    scored.emplace_back(rng.uniform01(), i);
  }
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  json results = json::array();
  for (std::size_t k = 0; k < req.top_n && k < scored.size(); ++k) {
    results.push_back({{"index", scored[k].second}, {"relevance_score", scored[k].first}});
  }
  return {{"id", id},
          {"model", req.model},
          {"results", std::move(results)},
          {"usage", {{"prompt_tokens", req.prompt_tokens}, {"total_tokens", req.prompt_tokens}}}};
}

}  // namespace

std::optional<PoolingRequest> parse_pooling_request(std::string_view body, PoolKind kind,
                                                    const std::vector<std::string>& served_models, ApiError& error) {
  const json j = json::parse(body, nullptr, false);
  if (!j.is_object()) return fail(error, "", "request body must be a JSON object");
  PoolingRequest req;
  req.kind = kind;
  const auto model = j.find("model");
  if (model == j.end() || !model->is_string()) return fail(error, "model", "'model' is required");
  req.model = model->get<std::string>();
  if (std::find(served_models.begin(), served_models.end(), req.model) == served_models.end())
    return fail(error, "model", fmt::format("The model `{}` does not exist.", req.model), 404);
  if (!(kind == PoolKind::embeddings ? read_embeddings(j, req, error) : read_rerank(j, req, error)))
    return std::nullopt;
  for (const std::uint32_t n : req.sequences) req.prompt_tokens += n;
  return req;
}

std::string pooling_response(const PoolingRequest& req, std::string_view id) {
  return (req.kind == PoolKind::embeddings ? embeddings_answer(req, id) : rerank_answer(req, id)).dump();
}

}  // namespace capsweep::llmsim

#include "llmsim/openai.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <nlohmann/json.hpp>

#include "core/text.hpp"
#include "llmsim/engine.hpp"

namespace capsweep::llmsim {
namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 64> kWords{
    " the",  " of",    " and",      " to",    " in",    " is",    " that",   " for",     " it",      " as",
    " with", " on",    " was",      " be",    " by",    " at",    " this",   " from",    " are",     " or",
    " an",   " have",  " not",      " which", " one",   " all",   " can",    " their",   " there",   " been",
    " has",  " more",  " will",     " would", " about", " into",  " time",   " only",    " other",   " new",
    " some", " could", " these",    " two",   " may",   " first", " then",   " any",     " like",    " such",
    " over", " model", " token",    " batch", " cache", " queue", " server", " request", " latency", " stream",
    " load", " rate",  " capacity", " sweep"};

std::uint64_t mix(std::uint64_t x) noexcept {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::uint64_t hash_text(std::string_view s) noexcept {  // FNV-1a
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

void append_uint(std::string& out, std::uint64_t v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}

std::optional<CompletionRequest> fail(ApiError& error, std::string param, std::string message, unsigned status = 400) {
  error.status = status;
  error.param = std::move(param);
  error.message = std::move(message);
  error.type = status == 404 ? "NotFoundError" : "BadRequestError";
  return std::nullopt;
}

}  // namespace

std::string error_body(const ApiError& e) {
  json j{{"error",
          {{"message", e.message},
           {"type", e.type},
           {"param", e.param.empty() ? json(nullptr) : json(e.param)},
           {"code", e.status}}}};
  return j.dump();
}

std::string_view token_text(std::uint64_t seed, std::uint32_t index) noexcept {
  return kWords[mix(seed ^ (std::uint64_t{index} * 0x9e3779b97f4a7c15ull)) % kWords.size()];
}

namespace {

// Names a prompt's blocks of kBlockTokens tokens as it is read, token by token: each block's
// hash is chained over every token before the block's end, so two prompts share a block's
// name only when they share everything up to it, as vLLM's prefix caching names its blocks.
class BlockHasher {
 public:
  explicit BlockHasher(std::vector<std::uint64_t>& out) : out_(out) {}
  void token(std::uint64_t h) {
    chain_ = mix(chain_ ^ h);
    if (++in_block_ == kBlockTokens) {
      out_.push_back(chain_);
      in_block_ = 0;
    }
  }
  // Every whitespace-separated word of `text` is a token (as count_words counts them).
  void words(std::string_view text) {
    std::size_t i = 0;
    while (i < text.size()) {
      const std::size_t start = text.find_first_not_of(" \n\t\r\f\v", i);
      if (start == std::string_view::npos) break;
      std::size_t end = text.find_first_of(" \n\t\r\f\v", start);
      if (end == std::string_view::npos) end = text.size();
      token(hash_text(text.substr(start, end - start)));
      i = end;
    }
  }
  // Mixes in what is no token of its own (a chat turn's role).
  void mark(std::string_view s) { chain_ = mix(chain_ ^ hash_text(s) ^ 0x726f6c65ull); }

 private:
  std::vector<std::uint64_t>& out_;
  std::uint64_t chain_ = 0x70726566ull;
  std::uint32_t in_block_ = 0;
};

// A completion's prompt (a response's input text) at `key`: text (its words) or token ids.
bool read_completion_prompt(const json& j, const std::string& key, CompletionRequest& req, std::uint64_t& text_hash,
                            ApiError& error) {
  auto prompt = j.find(key);
  if (prompt == j.end()) return fail(error, key, fmt::format("'{}' is required", key)), false;
  if (prompt->is_string()) {
    const auto& s = prompt->get_ref<const std::string&>();
    req.prompt_tokens = count_words(s);
    text_hash = hash_text(s);
    req.question = s;
    BlockHasher(req.blocks).words(s);
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number_integer()) {
    BlockHasher blocks(req.blocks);
    for (const auto& t : *prompt) {
      if (!t.is_number_integer()) return fail(error, key, "token ids must be integers"), false;
      text_hash = mix(text_hash ^ t.get<std::uint64_t>());
      blocks.token(t.get<std::uint64_t>());
    }
    req.prompt_tokens = static_cast<std::uint32_t>(prompt->size());
  } else {
    return fail(error, key, fmt::format("'{}' must be a string or an array of token ids", key)), false;
  }
  return true;
}

// A chat's messages (a response's input items) at `key`: the words of every message's content
// (a string or text parts); the last user turn is the question.
bool read_chat_messages(const json& j, const std::string& key, CompletionRequest& req, std::uint64_t& text_hash,
                        ApiError& error) {
  auto messages = j.find(key);
  if (messages == j.end() || !messages->is_array() || messages->empty()) {
    return fail(error, key, fmt::format("'{}' must be a non-empty array", key)), false;
  }
  BlockHasher blocks(req.blocks);
  for (std::size_t i = 0; i < messages->size(); ++i) {
    const auto& m = (*messages)[i];
    const std::string param = fmt::format("{}[{}]", key, i);
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return fail(error, param, "each message needs a 'role'"), false;
    }
    blocks.mark(m["role"].get_ref<const std::string&>());
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) continue;
    if (content->is_string()) {
      req.prompt_tokens += count_words(content->get_ref<const std::string&>());
      blocks.words(content->get_ref<const std::string&>());
      text_hash = mix(text_hash ^ hash_text(content->get_ref<const std::string&>()));
      if (m["role"] == "user") req.question = content->get<std::string>();
    } else if (content->is_array()) {
      for (const auto& part : *content) {
        if (part.is_object() && part.contains("text") && part["text"].is_string()) {
          req.prompt_tokens += count_words(part["text"].get_ref<const std::string&>());
          blocks.words(part["text"].get_ref<const std::string&>());
          text_hash = mix(text_hash ^ hash_text(part["text"].get_ref<const std::string&>()));
        }
      }
    } else {
      return fail(error, param + ".content", "'content' must be a string or an array of parts"), false;
    }
  }
  return true;
}

// max_completion_tokens (or max_tokens; a response's max_output_tokens); absent: 16 for
// completions, else 256.
bool read_max_tokens(const json& j, Api api, CompletionRequest& req, ApiError& error) {
  const char* max_key = nullptr;
  const auto keys = api == Api::responses ? std::vector<const char*>{"max_output_tokens"}
                                          : std::vector<const char*>{"max_completion_tokens", "max_tokens"};
  for (const char* key : keys) {
    if (j.contains(key) && !j[key].is_null()) {
      max_key = key;
      break;
    }
  }
  if (!max_key) {
    req.max_tokens = api == Api::completions ? 16 : 256;
    return true;
  }
  const auto& v = j[max_key];
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0 || v.get<std::int64_t>() > std::int64_t{UINT32_MAX}) {
    return fail(error, max_key, fmt::format("'{}' must be a positive integer", max_key)), false;
  }
  req.max_tokens = static_cast<std::uint32_t>(v.get<std::int64_t>());
  return true;
}

// stream, ignore_eos and stream_options' include_usage and continuous_usage_stats.
bool read_stream_flags(const json& j, CompletionRequest& req, ApiError& error) {
  auto flag = [&](const json& obj, const char* key, bool& out) -> bool {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return true;
    if (!it->is_boolean()) return false;
    out = it->get<bool>();
    return true;
  };
  if (!flag(j, "stream", req.stream)) return fail(error, "stream", "'stream' must be a boolean"), false;
  if (!flag(j, "ignore_eos", req.ignore_eos)) return fail(error, "ignore_eos", "'ignore_eos' must be a boolean"), false;
  if (auto so = j.find("stream_options"); so != j.end() && !so->is_null()) {
    if (!so->is_object()) return fail(error, "stream_options", "'stream_options' must be an object"), false;
    if (!flag(*so, "include_usage", req.include_usage)) {
      return fail(error, "stream_options.include_usage", "must be a boolean"), false;
    }
    if (!flag(*so, "continuous_usage_stats", req.continuous_usage)) {
      return fail(error, "stream_options.continuous_usage_stats", "must be a boolean"), false;
    }
  }
  return true;
}

// The text's seed (the server's, the request's seed, the prompt), temperature, and what shapes
// a structured answer: response_format, tools (chat only), tool_choice.
bool read_sampling_and_shape(const json& j, Api api, std::uint64_t server_seed, std::uint64_t text_hash,
                             CompletionRequest& req, ApiError& error) {
  std::uint64_t seed = server_seed;
  const auto s = j.find("seed");
  if (s != j.end() && s->is_number_integer()) seed = mix(seed ^ s->get<std::uint64_t>());
  req.text_seed = mix(seed ^ text_hash);
  if (auto t = j.find("temperature"); t != j.end() && !t->is_null()) {
    if (!t->is_number() || t->get<double>() < 0 || t->get<double>() > 2) {
      return fail(error, "temperature", "'temperature' must be a number in [0, 2]"), false;
    }
    req.sampled = t->get<double>() > 0 && s == j.end();
  }
  if (auto rf = j.find("response_format"); rf != j.end() && !rf->is_null()) {
    if (!rf->is_object() || !rf->contains("type")) {
      return fail(error, "response_format", "'response_format' must be an object with a 'type'"), false;
    }
    req.response_format = *rf;
  }
  if (auto tools = j.find("tools"); tools != j.end() && !tools->is_null()) {
    if (api != Api::chat) return fail(error, "tools", "'tools' needs /v1/chat/completions"), false;
    if (!tools->is_array()) return fail(error, "tools", "'tools' must be an array"), false;
    req.tools = *tools;
  }
  if (auto tc = j.find("tool_choice"); tc != j.end()) req.tool_choice = *tc;
  return true;
}

// A response's store (whether the server keeps it) and previous_response_id.
bool read_response_state(const json& j, CompletionRequest& req, ApiError& error) {
  if (auto s = j.find("store"); s != j.end() && !s->is_null()) {
    if (!s->is_boolean()) return fail(error, "store", "'store' must be a boolean"), false;
    req.store = s->get<bool>();
  }
  if (auto p = j.find("previous_response_id"); p != j.end() && !p->is_null()) {
    if (!p->is_string() || p->get_ref<const std::string&>().empty()) {
      return fail(error, "previous_response_id", "'previous_response_id' must be a response's id"), false;
    }
    req.previous_response_id = p->get<std::string>();
  }
  return true;
}

}  // namespace

std::optional<CompletionRequest> parse_completion_request(std::string_view body, Api api, std::string_view served_model,
                                                          std::uint64_t server_seed, ApiError& error) {
  return parse_completion_request(body, api, std::vector<std::string>{std::string(served_model)}, server_seed, error);
}

std::optional<CompletionRequest> parse_completion_request(std::string_view body, Api api,
                                                          const std::vector<std::string>& served_models,
                                                          std::uint64_t server_seed, ApiError& error) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail(error, "", "request body is not valid JSON");
  if (!j.is_object()) return fail(error, "", "request body must be a JSON object");
  CompletionRequest req;
  req.api = api;
  auto model = j.find("model");
  if (model == j.end() || !model->is_string()) return fail(error, "model", "'model' is required");
  req.model = model->get<std::string>();
  if (std::find(served_models.begin(), served_models.end(), req.model) == served_models.end()) {
    return fail(error, "model", fmt::format("The model `{}` does not exist.", req.model), 404);
  }
  std::uint64_t text_hash = 0;
  const std::string key = api == Api::completions ? "prompt" : api == Api::chat ? "messages" : "input";
  const bool text = api == Api::completions || (api == Api::responses && j.contains(key) && j[key].is_string());
  const bool prompt_read =
      text ? read_completion_prompt(j, key, req, text_hash, error) : read_chat_messages(j, key, req, text_hash, error);
  if (!prompt_read) return std::nullopt;
  if (req.prompt_tokens == 0) return fail(error, key, "the prompt is empty");
  if (!read_max_tokens(j, api, req, error) || !read_stream_flags(j, req, error) ||
      !read_sampling_and_shape(j, api, server_seed, text_hash, req, error) ||
      (api == Api::responses && !read_response_state(j, req, error))) {
    return std::nullopt;
  }
  return req;
}

ChunkFormatter::ChunkFormatter(const CompletionRequest& req, std::string_view id, std::int64_t created)
    : req_(req), id_(id), created_(created) {
  head_ =
      fmt::format(R"(data: {{"id":"{}","object":"{}","created":{},"model":{},"choices":[)", id,
                  req.api == Api::chat ? "chat.completion.chunk" : "text_completion", created, json(req.model).dump());
}

void ChunkFormatter::append_role(std::string& out) const {
  if (req_.api == Api::responses) return append_response_created(out);
  out += head_;
  out += R"({"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]})";
  out += "\n\n";
}

void ChunkFormatter::append_usage_object(std::string& out, std::uint32_t completion_tokens) const {
  out += R"("usage":{"prompt_tokens":)";
  append_uint(out, req_.prompt_tokens);
  out += R"(,"total_tokens":)";
  append_uint(out, std::uint64_t{req_.prompt_tokens} + completion_tokens);
  out += R"(,"completion_tokens":)";
  append_uint(out, completion_tokens);
  if (req_.reasoning_tokens > 0) {
    out += R"(,"completion_tokens_details":{"reasoning_tokens":)";
    append_uint(out, std::min(req_.reasoning_tokens, completion_tokens));
    out += '}';
  }
  out += '}';
}

std::string_view ChunkFormatter::piece(std::uint32_t index) const {
  const auto& pieces = req_.script.pieces;
  return index < pieces.size() ? std::string_view(pieces[index]) : token_text(req_.text_seed, index);
}

std::string_view ChunkFormatter::finish_reason(std::uint32_t completion_tokens) const {
  const auto& sc = req_.script;
  if (!sc.pieces.empty() && completion_tokens == sc.pieces.size()) return sc.finish_reason;
  return "length";  // the word stream always runs to max_tokens; a cut script too
}

void ChunkFormatter::append_text(std::string& out, std::uint32_t first, std::uint32_t count) const {
  const bool scripted = !req_.script.pieces.empty();
  for (std::uint32_t i = 0; i < count; ++i) {
    if (!scripted) {
      out += token_text(req_.text_seed, first + i);
      continue;
    }
    const std::string quoted = json(std::string(piece(first + i))).dump();
    out.append(quoted, 1, quoted.size() - 2);
  }
}

void ChunkFormatter::append_tokens(std::string& out, std::uint32_t first, std::uint32_t count,
                                   std::uint32_t completion_tokens, bool finished) const {
  if (req_.api == Api::responses) return append_response_delta(out, first, count);
  out += head_;
  if (req_.script.tool_call) {
    out += R"({"index":0,"delta":{"tool_calls":[{"index":0,)";
    if (first == 0) {
      out += R"("id":"call_)";
      out += id_;
      out += R"(","type":"function","function":{"name":)";
      out += json(req_.script.tool_name).dump();
      out += R"(,"arguments":")";
    } else {
      out += R"("function":{"arguments":")";
    }
  } else if (req_.api == Api::chat && first < req_.reasoning_tokens) {
    out += R"({"index":0,"delta":{"reasoning_content":")";  // the caller never lets a chunk straddle
  } else {
    out += req_.api == Api::chat ? R"({"index":0,"delta":{"content":")" : R"({"index":0,"text":")";
  }
  append_text(out, first, count);
  if (req_.script.tool_call)
    out += R"("}}]},"logprobs":null,"finish_reason":)";
  else
    out += req_.api == Api::chat ? R"("},"logprobs":null,"finish_reason":)" : R"(","logprobs":null,"finish_reason":)";
  if (finished) {
    out += '"';
    out += finish_reason(completion_tokens);
    out += R"(","stop_reason":null}])";
  } else {
    out += R"(null,"stop_reason":null}])";
  }
  if (req_.continuous_usage) {
    out += ',';
    append_usage_object(out, completion_tokens);
  }
  out += "}\n\n";
}

void ChunkFormatter::append_end(std::string& out, std::uint32_t completion_tokens) const {
  if (req_.api == Api::responses) return append_response_end(out, completion_tokens);
  if (req_.include_usage) {
    out += head_;
    out += "],";
    append_usage_object(out, completion_tokens);
    out += "}\n\n";
  }
  out += "data: [DONE]\n\n";
}

std::string ChunkFormatter::full_response(std::uint32_t completion_tokens) const {
  if (req_.api == Api::responses) return response_object(completion_tokens).dump();
  std::string text, reasoning;
  for (std::uint32_t i = 0; i < completion_tokens; ++i) (i < req_.reasoning_tokens ? reasoning : text) += piece(i);
  json j;
  j["id"] = id_;
  j["created"] = created_;
  j["object"] = req_.api == Api::chat ? "chat.completion" : "text_completion";
  j["model"] = req_.model;
  const std::string finish(finish_reason(completion_tokens));
  if (req_.api == Api::chat) {
    json message{{"role", "assistant"}, {"content", text}};
    if (req_.reasoning_tokens > 0) message["reasoning_content"] = reasoning;
    if (req_.script.tool_call) {
      message["content"] = nullptr;
      message["tool_calls"] = json::array({{{"id", "call_" + id_},
                                            {"type", "function"},
                                            {"function", {{"name", req_.script.tool_name}, {"arguments", text}}}}});
    }
    j["choices"] = json::array({{{"index", 0}, {"message", message}, {"finish_reason", finish}}});
  } else {
    j["choices"] = json::array({{{"index", 0}, {"text", text}, {"finish_reason", finish}}});
  }
  j["usage"] = {{"prompt_tokens", req_.prompt_tokens},
                {"completion_tokens", completion_tokens},
                {"total_tokens", req_.prompt_tokens + completion_tokens}};
  if (req_.reasoning_tokens > 0) {
    j["usage"]["completion_tokens_details"] = {
        {"reasoning_tokens", std::min(req_.reasoning_tokens, completion_tokens)}};
  }
  return j.dump();
}

}  // namespace capsweep::llmsim

// The target API table: completions, chat, responses, embeddings and rerank from the start, more
// by register_api.
#include "llm/api_table.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/row_table.hpp"
#include "llm/api_rows.hpp"

namespace capsweep::llm {

namespace {

using json = nlohmann::json;

ApiRow completions_row() {
  ApiRow r;
  r.name = "completions";
  r.path = "/v1/completions";
  r.request = [](json& body, const RequestText& text) {
    body["prompt"] = text.prompt;
    body["max_tokens"] = text.max_tokens;
  };
  return r;
}

ApiRow chat_row() {
  ApiRow r;
  r.name = "chat";
  r.path = "/v1/chat/completions";
  r.messages = true;
  r.request = [](json& body, const RequestText& text) {
    body["messages"] = text.messages.empty() ? json::array({{{"role", "user"}, {"content", text.prompt}}})
                                             : json::parse(text.messages, nullptr, false);
    body["max_completion_tokens"] = text.max_tokens;
  };
  return r;
}

RowTable<ApiRow>& api_table() {
  static RowTable<ApiRow> t(
      "target API", {completions_row(), chat_row(), responses_row(), embeddings_row(), rerank_row()});  // Api's order
  return t;
}

}  // namespace

const ApiRow& api_row(Api a) noexcept {
  return api_table().at(static_cast<std::size_t>(a));
}

Api register_api(ApiRow row) {
  if (row.name.empty() || row.path.empty() || row.path.front() != '/' || !row.request || !row.read_chunk ||
      !row.read_body) {
    throw std::invalid_argument("a target API needs a name, a path from '/', a request body and a stream reader");
  }
  return static_cast<Api>(api_table().add(std::move(row)));
}

std::vector<std::string> api_names() {
  return api_table().names();
}

std::string_view to_string(Api a) noexcept {
  return api_row(a).name;
}

std::optional<Api> parse_api(std::string_view name) noexcept {
  const auto i = api_table().find(name);
  return i ? std::optional<Api>(static_cast<Api>(*i)) : std::nullopt;
}

}  // namespace capsweep::llm

// The embeddings and rerank rows of the target-API table: their request bodies, their whole
// answers read by top-level members (values and errors), the JSON member scanner under them,
// and what a workload of items per request is made of.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <set>

#include "llm/api_table.hpp"
#include "llm/json_scan.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"

using namespace capsweep;
using namespace capsweep::llm;
using json = nlohmann::json;

namespace {

Target target_of(json extra) {
  json j = {{"base_url", "http://127.0.0.1:8000"}, {"model", "m"}};
  j.update(extra);
  auto t = parse_target(j);
  INFO((t ? std::string() : t.error().message));
  REQUIRE(t.has_value());
  return *t;
}

}  // namespace

TEST_CASE("pooling APIs: rows are named and generate nothing, answers never streamed") {
  REQUIRE(parse_api("embeddings") == Api::embeddings);
  REQUIRE(parse_api("rerank") == Api::rerank);
  CHECK(api_row(Api::embeddings).path == "/v1/embeddings");
  CHECK(api_row(Api::rerank).path == "/v1/rerank");
  for (Api a : {Api::embeddings, Api::rerank}) {
    CHECK_FALSE(api_row(a).generates);
    CHECK_FALSE(api_row(a).quality);
    const Target t = target_of({{"api", to_string(a)}});
    CHECK_FALSE(t.stream);
    CHECK_FALSE(t.ignore_eos);
    // Whole answers whatever stream says (the schema's default is true).
    const Target streamed = target_of({{"api", to_string(a)}, {"stream", true}, {"ignore_eos", true}});
    CHECK_FALSE(streamed.stream);
    CHECK_FALSE(streamed.ignore_eos);
  }
  CHECK(api_row(Api::embeddings).items_key == "inputs_per_request");
  CHECK(api_row(Api::rerank).items_key == "documents_per_request");
}

TEST_CASE("pooling APIs: an embeddings request sends its inputs, base64 unless extra_body says") {
  const std::vector<std::string> inputs{"a b", "c d e"};
  const json body =
      json::parse(request_body(target_of({{"api", "embeddings"}}), {.prompt = "p", .inputs = inputs, .max_tokens = 9}));
  CHECK(body.at("input") == json::array({"a b", "c d e"}));
  CHECK(body.at("encoding_format") == "base64");
  CHECK(body.at("model") == "m");
  for (const char* absent : {"stream", "stream_options", "ignore_eos", "max_tokens", "prompt"}) {
    INFO(absent);
    CHECK_FALSE(body.contains(absent));
  }
  // No items: one input, the prompt (calibration's request).
  CHECK(json::parse(completion_body(target_of({{"api", "embeddings"}}), "x y", 1)).at("input") == json::array({"x y"}));
  const json floats = json::parse(request_body(
      target_of({{"api", "embeddings"}, {"extra_body", {{"encoding_format", "float"}, {"dimensions", 64}}}}),
      {.inputs = inputs}));
  CHECK(floats.at("encoding_format") == "float");
  CHECK(floats.at("dimensions") == 64);
}

TEST_CASE("pooling APIs: a rerank request sends the query and documents, which extra_body may not set") {
  const std::vector<std::string> docs{"d1", "d2", "d3"};
  const Target t = target_of({{"api", "rerank"}, {"path", "/rerank"}});
  CHECK(t.completion_path() == "/rerank");
  const json body = json::parse(request_body(t, {.prompt = "q", .inputs = docs}));
  CHECK(body.at("query") == "q");
  CHECK(body.at("documents") == json::array({"d1", "d2", "d3"}));
  CHECK_FALSE(body.contains("stream"));
  for (const char* field : {"query", "documents", "input"}) {
    auto bad = parse_target(
        json{{"base_url", "http://h:1"}, {"model", "m"}, {"api", "rerank"}, {"extra_body", {{field, "x"}}}});
    REQUIRE_FALSE(bad.has_value());
    CHECK(bad.error().field == std::string("/target/extra_body/") + field);
  }
  // Chat may carry a "query" of its own in extra_body: it is rerank's field, not chat's.
  CHECK(parse_target(json{{"base_url", "http://h:1"}, {"model", "m"}, {"api", "chat"}, {"extra_body", {{"query", 1}}}})
            .has_value());
}

TEST_CASE("pooling APIs: target.path is a path from '/', else refused naming it") {
  for (const json& bad : {json(""), json("/"), json("rerank"), json("/a?b=1"), json("/a b"), json(7), json("/x\ny"),
                          json("/" + std::string(300, 'a'))}) {
    auto t = parse_target(json{{"base_url", "http://h:1"}, {"model", "m"}, {"path", bad}});
    INFO(bad.dump());
    REQUIRE_FALSE(t.has_value());
    CHECK(t.error().field == "/target/path");
  }
  CHECK(target_of({{"path", "/v2/rerank"}}).completion_path() == "/v2/rerank");
  CHECK(target_of({{"base_url", "http://h:1/gw"}, {"path", "/rerank"}}).completion_path() == "/gw/rerank");
}

TEST_CASE("pooling APIs: an answer's results are counted and its usage read, other bodies are not answers") {
  const auto& embeddings = api_row(Api::embeddings);
  const auto u = embeddings.read_body(
      R"({"object":"list","data":[{"index":0,"embedding":"AAAA"},{"index":1,"embedding":[0.5,-1e-3,[2]]}],)"
      R"("model":"m","usage":{"prompt_tokens":12,"total_tokens":12}})");
  REQUIRE(u.has_value());
  CHECK(u->items == 2u);
  CHECK(u->prompt == 12u);
  CHECK(u->completion == 0u);
  // Rerank: results, total_tokens when there is no prompt_tokens (vLLM's rerank usage).
  const auto r =
      api_row(Api::rerank)
          .read_body(
              R"({"id":"r","results":[{"index":2,"relevance_score":0.9,"document":{"text":"a \"}\" b"}}],"usage":{"total_tokens":30}})");
  REQUIRE(r.has_value());
  CHECK(r->items == 1u);
  CHECK(r->prompt == 30u);
  // A body without its list: read, with no items (the client calls it an error).
  const auto none = embeddings.read_body(R"({"object":"list","usage":{"prompt_tokens":3}})");
  REQUIRE(none.has_value());
  CHECK_FALSE(none->items.has_value());
  CHECK_FALSE(embeddings.read_body(R"({"data":"x"})")->items.has_value());
  for (const char* bad : {"", "[]", "null", "{", R"({"data":[1,2})", R"({"data":[1,2]} x)", "not json"}) {
    INFO(bad);
    CHECK_FALSE(embeddings.read_body(bad).has_value());
  }
}

TEST_CASE("json scan: top-level members and array elements by structure, malformed text refused") {
  JsonMembers m;
  REQUIRE(m.parse(R"( {"a": {"b": [1, "]"]}, "c": "x\"y", "d": null, "e": -2.5e3} )"));
  CHECK(m.get("a") == R"({"b": [1, "]"]})");
  CHECK(m.get("c") == R"("x\"y")");
  CHECK(unquote(m.get("c")) == R"(x\"y)");
  CHECK(m.get("d") == "null");
  CHECK(m.get("e") == "-2.5e3");
  CHECK(m.get("b").empty());
  CHECK(unquote("7").empty());
  REQUIRE(m.parse("{}"));
  CHECK(m.get("a").empty());
  for (const char* bad : {"", "[]", "{", R"({"a"})", R"({"a":})", R"({"a":1,})", R"({"a":1} 2)", R"({a:1})",
                          R"({"a":"x)", "{\"a\":\"\x01\"}", R"({"a":xyz})"}) {
    INFO(bad);
    CHECK_FALSE(m.parse(bad));
  }
  CHECK(count_elements("[]") == 0u);
  CHECK(count_elements(R"([1, "a,b", {"x": [1,2]}, [3], null])") == 5u);
  for (const char* bad : {"", "{}", "[", "[1,]", "[1 2]", "[1] x", "\"[1]\""}) {
    INFO(bad);
    CHECK_FALSE(count_elements(bad).has_value());
  }
}

TEST_CASE("pooling APIs: a workload's items fit the target's API, counted per request from the seed") {
  auto w = parse_workload(
      json{{"prompt_tokens", 10}, {"inputs_per_request", {{"dist", "uniform"}, {"min", 2}, {"max", 5}}}});
  REQUIRE(w.has_value());
  REQUIRE(w->items.has_value());
  CHECK(w->items->key == "inputs_per_request");
  // For chat: refused, naming the field; for rerank: the other kind of items.
  auto chat = fit_to_api(*w, Api::chat);
  REQUIRE_FALSE(chat.has_value());
  CHECK(chat.error().field == "/workload/inputs_per_request");
  CHECK_FALSE(fit_to_api(*w, Api::rerank).has_value());
  auto fitted = fit_to_api(*w, Api::embeddings);
  REQUIRE(fitted.has_value());
  const Workload load(*fitted, PromptSynth(1.0, 0, 3));
  std::set<std::size_t> counts;
  for (std::uint64_t i = 0; i < 200; ++i) {
    const WorkItem item = load.item(i);
    REQUIRE(item.inputs.size() >= 2);
    REQUIRE(item.inputs.size() <= 5);
    counts.insert(item.inputs.size());
    CHECK(item.input_tokens == 10 * item.inputs.size());
    CHECK(item.inputs.front() != item.prompt);
    CHECK(item.inputs.front() != item.inputs.back());
  }
  CHECK(counts.size() == 4);
  CHECK(load.item(17).inputs == load.item(17).inputs);  // the same from the seed
  // An API of items without the count: one a request; a query counts with each document.
  auto rerank = fit_to_api(*parse_workload(json{{"prompt_tokens", 6}, {"documents_per_request", 3}}), Api::rerank);
  REQUIRE(rerank.has_value());
  CHECK(Workload(*rerank, PromptSynth(1.0, 0, 3)).item(0).input_tokens == 3 * (6 + 6));
  auto one = fit_to_api(*parse_workload(json::object()), Api::embeddings);
  REQUIRE(one.has_value());
  CHECK(Workload(*one, PromptSynth(1.0, 0, 3)).item(0).inputs.size() == 1);
  CHECK_FALSE(fit_to_api(*parse_workload(json::object()), Api::chat)->items.has_value());
}

TEST_CASE("pooling APIs: items past the limits, twice, or with sessions are refused naming the field") {
  const auto refused = [](const json& workload, Api api, const std::string& field) {
    auto w = parse_workload(workload);
    if (w) {
      auto f = fit_to_api(*w, api);
      REQUIRE_FALSE(f.has_value());
      CHECK(f.error().field == field);
    } else {
      CHECK(w.error().field == field);
    }
  };
  refused({{"inputs_per_request", 3000}}, Api::embeddings, "/workload/inputs_per_request");
  refused({{"inputs_per_request", 2048}, {"prompt_tokens", 1024}}, Api::embeddings, "/workload/inputs_per_request");
  refused({{"inputs_per_request", 0}}, Api::embeddings, "/workload/inputs_per_request");
  // Keys are read in order: the second of the two is refused.
  refused({{"inputs_per_request", 2}, {"documents_per_request", 2}}, Api::embeddings, "/workload/inputs_per_request");
  refused({{"sessions", {{"turns", 2}}}}, Api::embeddings, "/workload/sessions");
  CHECK(parse_workload(json{{"inputs_per_request", 2048}, {"prompt_tokens", 512}}).has_value());
}

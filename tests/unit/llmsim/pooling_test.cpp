// capsweep-llmsim's embeddings and rerank requests: what they are parsed into (every input, or
// every query-and-document pair, one sequence of its tokens), their errors naming the field,
// and the whole answers they get.
#include "llmsim/pooling.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep::llmsim;
using json = nlohmann::json;

namespace {

std::optional<PoolingRequest> parse(const json& body, PoolKind kind, ApiError& error) {
  return parse_pooling_request(body.dump(), kind, {"base", "sim"}, error);
}

}  // namespace

TEST_CASE("llmsim pooling: embeddings inputs are texts or token ids, one sequence each") {
  ApiError error;
  auto one = parse({{"model", "sim"}, {"input", "a b c"}}, PoolKind::embeddings, error);
  REQUIRE(one.has_value());
  CHECK(one->sequences == std::vector<std::uint32_t>{3});
  CHECK(one->prompt_tokens == 3);
  CHECK_FALSE(one->base64);
  auto many = parse({{"model", "sim"},
                     {"input", json::array({"a", "b c", json::array({5, 6, 7, 8})})},
                     {"encoding_format", "base64"}},
                    PoolKind::embeddings, error);
  REQUIRE(many.has_value());
  CHECK(many->sequences == std::vector<std::uint32_t>{1, 2, 4});
  CHECK(many->prompt_tokens == 7);
  CHECK(many->base64);
  auto ids = parse({{"model", "sim"}, {"input", json::array({1, 2})}}, PoolKind::embeddings, error);
  REQUIRE(ids.has_value());
  CHECK(ids->sequences == std::vector<std::uint32_t>{2});

  const json answer = json::parse(pooling_response(*many, "embd-1"));
  REQUIRE(answer.at("data").size() == 3);
  CHECK(answer["data"][2]["index"] == 2);
  CHECK(answer["data"][0]["embedding"].is_string());  // base64: 32 floats, 128 bytes
  CHECK(answer["data"][0]["embedding"].get<std::string>().size() == 172);
  CHECK(answer["usage"]["prompt_tokens"] == 7);
  const json floats = json::parse(pooling_response(*one, "embd-2"));
  CHECK(floats["data"][0]["embedding"].size() == 32);
}

TEST_CASE("llmsim pooling: a rerank pair is the query and a document, top_n bounds the results") {
  ApiError error;
  auto r = parse({{"model", "sim"},
                  {"query", "q r"},
                  {"documents", json::array({json("a"), json{{"text", "b c d"}}})},
                  {"top_n", 1}},
                 PoolKind::rerank, error);
  REQUIRE(r.has_value());
  CHECK(r->sequences == std::vector<std::uint32_t>{3, 5});
  CHECK(r->prompt_tokens == 8);
  CHECK(r->top_n == 1);
  const json answer = json::parse(pooling_response(*r, "rerank-1"));
  REQUIRE(answer.at("results").size() == 1);
  CHECK(answer["usage"]["total_tokens"] == 8);
  auto all =
      parse({{"model", "sim"}, {"query", "q"}, {"documents", json::array({"a", "b", "c"})}}, PoolKind::rerank, error);
  REQUIRE(all.has_value());
  const json results = json::parse(pooling_response(*all, "rerank-2"))["results"];
  REQUIRE(results.size() == 3);
  CHECK(results[0]["relevance_score"].get<double>() >= results[1]["relevance_score"].get<double>());
  CHECK(results[1]["relevance_score"].get<double>() >= results[2]["relevance_score"].get<double>());
}

TEST_CASE("llmsim pooling: bad requests are refused, naming the field") {
  const auto refused = [](const json& body, PoolKind kind, const std::string& param, unsigned status = 400) {
    ApiError error;
    INFO(body.dump());
    CHECK_FALSE(parse(body, kind, error).has_value());
    CHECK(error.param == param);
    CHECK(error.status == status);
  };
  refused(json::array(), PoolKind::embeddings, "");
  refused({{"input", "a"}}, PoolKind::embeddings, "model");
  refused({{"model", "other"}, {"input", "a"}}, PoolKind::embeddings, "model", 404);
  refused({{"model", "sim"}}, PoolKind::embeddings, "input");
  refused({{"model", "sim"}, {"input", json::array()}}, PoolKind::embeddings, "input");
  refused({{"model", "sim"}, {"input", "   "}}, PoolKind::embeddings, "input");
  refused({{"model", "sim"}, {"input", json::array({json("a"), json(3)})}}, PoolKind::embeddings, "input");
  refused({{"model", "sim"}, {"input", "a"}, {"encoding_format", "int8"}}, PoolKind::embeddings, "encoding_format");
  refused({{"model", "sim"}, {"documents", json::array({"a"})}}, PoolKind::rerank, "query");
  refused({{"model", "sim"}, {"query", "q"}}, PoolKind::rerank, "documents");
  refused({{"model", "sim"}, {"query", "q"}, {"documents", json::array()}}, PoolKind::rerank, "documents");
  refused({{"model", "sim"}, {"query", "q"}, {"documents", json::array({"a", ""})}}, PoolKind::rerank, "documents");
  refused({{"model", "sim"}, {"query", "q"}, {"documents", json::array({"a"})}, {"top_n", 0}}, PoolKind::rerank,
          "top_n");
}

// The Prometheus HTTP API as a gauge source: the block, the query path, the answers.
#include "observe/prom_query.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep;
using namespace capsweep::observe;
using json = nlohmann::json;

TEST_CASE("prom query: instant vectors are summed, scalars read, empty vectors have no value") {
  auto v = parse_instant_query(R"({"status":"success","data":{"resultType":"vector","result":[
      {"metric":{"pod":"a"},"value":[1700000000.1,"12"]},{"metric":{"pod":"b"},"value":[1700000000.1,"3.5"]}]}})");
  REQUIRE(v.has_value());
  REQUIRE(v->has_value());
  CHECK(**v == 15.5);
  auto s = parse_instant_query(R"({"status":"success","data":{"resultType":"scalar","result":[1.5,"0.25"]}})");
  REQUIRE(s.has_value());
  CHECK(s->value() == 0.25);
  auto none = parse_instant_query(R"({"status":"success","data":{"resultType":"vector","result":[]}})");
  REQUIRE(none.has_value());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("prom query: errors keep Prometheus' own message, and only the class of anything else") {
  auto rejected = parse_instant_query(
      R"({"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": unclosed left parenthesis"})");
  REQUIRE_FALSE(rejected.has_value());
  CHECK(rejected.error().message == "Prometheus: bad_data: invalid parameter \"query\": unclosed left parenthesis");
  auto html = parse_instant_query("<html>secret page of another service</html>");
  REQUIRE_FALSE(html.has_value());
  CHECK(html.error().message == "not a Prometheus API answer");
  CHECK(html.error().message.find("secret") == std::string::npos);
  auto matrix = parse_instant_query(R"({"status":"success","data":{"resultType":"matrix","result":[]}})");
  REQUIRE_FALSE(matrix.has_value());
  CHECK(matrix.error().message.find("matrix") != std::string::npos);
  auto garbled =
      parse_instant_query(R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,7]}]}})");
  CHECK_FALSE(garbled.has_value());
}

TEST_CASE("prom query: the path percent-encodes the PromQL below the server's base path") {
  CHECK(instant_query_path("", "sum(up{job=\"a b\"})") == "/api/v1/query?query=sum%28up%7Bjob%3D%22a%20b%22%7D%29");
  CHECK(instant_query_path("/prom/", "up") == "/prom/api/v1/query?query=up");
}

TEST_CASE("prom query: the spec block parses, and its errors name the field") {
  auto ok = parse_prom_source(json::parse(R"J({"url": "http://127.0.0.1:9090", "queries": {"running": "sum(x)"}})J"));
  REQUIRE(ok.has_value());
  CHECK(ok->url == "http://127.0.0.1:9090");
  CHECK(ok->queries.at("running") == "sum(x)");
  auto field = [](const char* text) {
    auto r = parse_prom_source(json::parse(text));
    return r ? std::string("(parsed)") : r.error().field;
  };
  CHECK(field(R"({"queries": {"running": "x"}})") == "/target/prometheus/url");
  CHECK(field(R"({"url": "http://h:1"})") == "/target/prometheus/queries");
  CHECK(field(R"({"url": "http://h:1", "queries": {}})") == "/target/prometheus/queries");
  CHECK(field(R"({"url": "http://h:1", "queries": {"queue": "x"}})") == "/target/prometheus/queries/queue");
  CHECK(field(R"({"url": "http://h:1", "queries": {"waiting": ""}})") == "/target/prometheus/queries/waiting");
  CHECK(field("[1]") == "/target/prometheus");
}

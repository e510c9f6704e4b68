#include "llm/target.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;
using namespace capsweep::llm;
using json = nlohmann::json;
using namespace std::chrono_literals;

TEST_CASE("target: base URLs split into scheme, host, port and prefix") {
  auto t = parse_base_url(Target{}, "http://127.0.0.1:8000", "/u").value();
  CHECK(t.scheme == "http");
  CHECK(t.host == "127.0.0.1");
  CHECK(t.port == 8000);
  CHECK(t.base_path.empty());
  auto s = parse_base_url(Target{}, "https://llm.internal/serving/v2/", "/u").value();
  CHECK(s.tls());
  CHECK(s.port == 443);
  CHECK(s.base_path == "/serving/v2");
  CHECK(s.completion_path() == "/serving/v2/v1/completions");
  auto v6 = parse_base_url(Target{}, "http://[::1]:9000", "/u").value();
  CHECK(v6.host == "::1");
  CHECK(v6.port == 9000);
  CHECK(parse_base_url(Target{}, "http://localhost", "/u").value().port == 80);
}

TEST_CASE("target: bad base URLs are errors naming the field") {
  for (const char* bad : {"127.0.0.1:8000", "ftp://x", "http://", "http://h:0", "http://h:99999", "http://h:80x",
                          "http://user:pw@h", "http://h/p?q=1", "http://[::1"}) {
    INFO(bad);
    auto r = parse_base_url(Target{}, bad, "/target/base_url");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == "/target/base_url");
  }
}

TEST_CASE("target: the spec's target object parses with its options") {
  auto t = parse_target(json::parse(R"({"base_url": "http://127.0.0.1:8000", "api": "chat", "model": "sim-8b",
      "headers": {"Authorization": "Bearer s3cret"}, "extra_body": {"temperature": 0},
      "stream": true, "ignore_eos": false, "tls": {"verify": false, "ca_file": "/etc/ca.pem"},
      "timeouts": {"connect_s": 2, "read_s": 30, "request_s": 120}, "metrics_url": "ignored here"})"));
  // metrics_url is the orchestrator's business: unknown keys are not this parser's to refuse.
  REQUIRE(t.has_value());
  CHECK(t->api == Api::chat);
  CHECK(t->headers.size() == 1);
  CHECK(t->headers[0].second == "Bearer s3cret");
  CHECK_FALSE(t->ignore_eos);
  CHECK_FALSE(t->verify_tls);
  CHECK(t->ca_file == "/etc/ca.pem");
  CHECK(t->connect_timeout == 2s);
  CHECK(t->read_timeout == 30s);
  CHECK(t->request_timeout == 120s);
}

TEST_CASE("target: bad target objects name the field") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"([])", "/target"},
      {R"({"model": "m"})", "/target/base_url"},
      {R"({"base_url": "http://h:1"})", "/target/model"},
      {R"({"base_url": "http://h:1", "model": ""})", "/target/model"},
      {R"({"base_url": "http://h:1", "model": "m", "api": "images"})", "/target/api"},
      {R"({"base_url": "http://h:1", "model": "m", "headers": []})", "/target/headers"},
      {R"({"base_url": "http://h:1", "model": "m", "headers": {"X": 1}})", "/target/headers/X"},
      {R"({"base_url": "http://h:1", "model": "m", "headers": {"X": "a\r\nInjected: 1"}})", "/target/headers/X"},
      {R"({"base_url": "http://h:1", "model": "m", "headers": {"Bad Name": "v"}})", "/target/headers/Bad Name"},
      {R"({"base_url": "http://h:1", "model": "m", "extra_body": 3})", "/target/extra_body"},
      {R"({"base_url": "http://h:1", "model": "m", "extra_body": {"n": 8}})", "/target/extra_body/n"},
      {R"({"base_url": "http://h:1", "model": "m", "extra_body": {"best_of": 4}})", "/target/extra_body/best_of"},
      {R"({"base_url": "http://h:1", "model": "m", "extra_body": {"max_tokens": 9999}})",
       "/target/extra_body/max_tokens"},
      {R"({"base_url": "http://h:1", "model": "m", "extra_body": {"stream": false}})", "/target/extra_body/stream"},
      {R"({"base_url": "http://h:1", "model": "m", "extra_body": {"model": "other"}})", "/target/extra_body/model"},
      {R"({"base_url": "http://h:1", "model": "m", "stream": "yes"})", "/target/stream"},
      {R"({"base_url": "http://h:1", "model": "m", "tls": {"verify": 1}})", "/target/tls/verify"},
      {R"({"base_url": "http://h:1", "model": "m", "timeouts": {"read_s": 0}})", "/target/timeouts/read_s"},
  };
  for (const auto& [text, field] : cases) {
    INFO(text);
    auto r = parse_target(json::parse(text));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
  }
}

TEST_CASE("target: request bodies carry the API's fields, streaming options and extra_body") {
  Target t;
  t.model = "m";
  t.extra_body = {{"temperature", 0.5}, {"model", "overridden"}};
  auto c = json::parse(completion_body(t, "hello world", 64));
  CHECK(c.at("model") == "m");
  CHECK(c.at("prompt") == "hello world");
  CHECK(c.at("max_tokens") == 64);
  CHECK(c.at("stream") == true);
  CHECK(c.at("stream_options").at("include_usage") == true);
  CHECK(c.at("stream_options").at("continuous_usage_stats") == true);
  CHECK(c.at("ignore_eos") == true);
  CHECK(c.at("temperature") == 0.5);
  t.api = Api::chat;
  t.stream = false;
  auto h = json::parse(completion_body(t, "hi", 8));
  CHECK(h.at("messages")[0].at("content") == "hi");
  CHECK(h.at("messages")[0].at("role") == "user");
  CHECK(h.at("max_completion_tokens") == 8);
  CHECK_FALSE(h.contains("stream_options"));
  CHECK_FALSE(h.contains("prompt"));
}

TEST_CASE("target: models are drawn per request by weight from the seed, the same everywhere") {
  auto t = parse_target(json::parse(
      R"({"base_url": "http://h:1", "models": [{"name": "base", "weight": 6}, {"name": "lora-a", "weight": 3}, {"name": "lora-b"}]})"));
  REQUIRE(t.has_value());
  REQUIRE(t->models.size() == 3);
  CHECK(t->model == "base");
  CHECK(t->models[2].weight == 1);
  std::array<int, 3> counts{};
  for (std::uint64_t i = 0; i < 10'000; ++i) ++counts[t->model_for(7, i)];
  CHECK(counts[0] == Approx(6000).margin(300));
  CHECK(counts[1] == Approx(3000).margin(300));
  CHECK(counts[2] == Approx(1000).margin(200));
  CHECK(t->model_for(7, 123) == t->model_for(7, 123));
  int differ = 0;
  for (std::uint64_t i = 0; i < 100; ++i) differ += t->model_for(7, i) != t->model_for(8, i);
  CHECK(differ > 20);  // another seed, another draw
  // A request names its model; a target of one model never draws.
  const json body = json::parse(request_body(*t, {.prompt = "x", .max_tokens = 2, .model = "lora-b"}));
  CHECK(body.at("model") == "lora-b");
  CHECK(json::parse(completion_body(*t, "x", 2)).at("model") == "base");
  auto one = parse_target(json::parse(R"({"base_url": "http://h:1", "model": "m"})"));
  CHECK(one->model_for(7, 5) == 0);
}

TEST_CASE("target: bad models name the field") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"({"base_url": "http://h:1"})", "/target/model"},
      {R"({"base_url": "http://h:1", "model": "m", "models": [{"name": "a"}]})", "/target/models"},
      {R"({"base_url": "http://h:1", "models": []})", "/target/models"},
      {R"({"base_url": "http://h:1", "models": {"name": "a"}})", "/target/models"},
      {R"({"base_url": "http://h:1", "models": [{"weight": 2}]})", "/target/models/0/name"},
      {R"({"base_url": "http://h:1", "models": [{"name": ""}]})", "/target/models/0/name"},
      {R"({"base_url": "http://h:1", "models": [{"name": "a"}, {"name": "a"}]})", "/target/models/1/name"},
      {R"({"base_url": "http://h:1", "models": [{"name": "a", "weight": 0}]})", "/target/models/0/weight"},
      {R"({"base_url": "http://h:1", "models": [{"name": "a", "weight": "2"}]})", "/target/models/0/weight"},
      {R"({"base_url": "http://h:1", "models": [{"name": "a", "share": 2}]})", "/target/models/0/share"},
      {R"({"base_url": "http://h:1", "models": ["a"]})", "/target/models/0"},
  };
  for (const auto& [text, field] : cases) {
    INFO(text);
    auto r = parse_target(json::parse(text));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
  }
  json many = {{"base_url", "http://h:1"}, {"models", json::array()}};
  for (int i = 0; i < 17; ++i) many["models"].push_back({{"name", "m" + std::to_string(i)}});
  CHECK(parse_target(many).error().field == "/target/models");
}

TEST_CASE("target: base_urls are replicas, each its own URL parts, balanced as asked") {
  auto t = parse_target(json::parse(
      R"({"base_urls": ["http://10.0.0.1:8000", "https://[::1]:9443/v2/"], "balance": "least_in_flight", "model": "m"})"));
  REQUIRE(t.has_value());
  CHECK(t->replica_count() == 2);
  CHECK(t->balance == Balance::least_in_flight);
  CHECK(t->host == "10.0.0.1");  // the first replica's parts are the target's own
  CHECK(t->port == 8000);
  const Target second = t->at_replica(1);
  CHECK(second.scheme == "https");
  CHECK(second.host == "::1");
  CHECK(second.port == 9443);
  CHECK(second.base_path == "/v2");
  CHECK(second.model == "m");
  CHECK(second.replicas.empty());
  CHECK(t->replica_urls() == std::vector<std::string>{"http://10.0.0.1:8000", "https://[::1]:9443/v2/"});
  auto rr = parse_target(json::parse(R"({"base_urls": ["http://a:1", "http://b:1"], "model": "m"})"));
  CHECK(rr->balance == Balance::round_robin);
  // One replica, or one base_url: no split.
  auto single = parse_target(json::parse(R"({"base_urls": ["http://a:1"], "model": "m"})"));
  CHECK(single->replica_count() == 1);
  CHECK(single->replica_urls().empty());
  CHECK(parse_target(json::parse(R"({"base_url": "http://a:1", "model": "m"})"))->replica_count() == 1);
}

TEST_CASE("target: bad base_urls and balance name the field") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"({"model": "m"})", "/target/base_url"},
      {R"({"base_url": "http://a:1", "base_urls": ["http://b:1"], "model": "m"})", "/target/base_urls"},
      {R"({"base_urls": [], "model": "m"})", "/target/base_urls"},
      {R"({"base_urls": "http://a:1", "model": "m"})", "/target/base_urls"},
      {R"({"base_urls": ["http://a:1", 5], "model": "m"})", "/target/base_urls/1"},
      {R"({"base_urls": ["http://a:1", "ftp://b"], "model": "m"})", "/target/base_urls/1"},
      {R"({"base_urls": ["http://a:1", "http://a:1/"], "model": "m"})", "/target/base_urls/1"},
      {R"({"base_urls": ["http://a:1"], "balance": "random", "model": "m"})", "/target/balance"},
      {R"({"base_urls": ["http://a:1"], "balance": 1, "model": "m"})", "/target/balance"},
  };
  for (const auto& [text, field] : cases) {
    INFO(text);
    auto r = parse_target(json::parse(text));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
  }
  json many = {{"base_urls", json::array()}, {"model", "m"}};
  for (int i = 0; i <= 64; ++i) many["base_urls"].push_back("http://h:" + std::to_string(i + 1));
  CHECK(parse_target(many).error().field == "/target/base_urls");
}

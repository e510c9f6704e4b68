#include "observe/prometheus.hpp"

#include <catch2/catch.hpp>
#include <cmath>

using namespace capsweep;
using namespace capsweep::observe;

namespace {
// An excerpt of a real vLLM /metrics page.
constexpr const char* kVllm = R"(# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 12.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.4375
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 123456.0
vllm:generation_tokens_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.04",model_name="meta-llama/Llama-3.1-8B-Instruct"} 20.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 42.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 42.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.25
vllm:time_to_first_token_seconds_created{engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.7e+09
)";
}  // namespace

TEST_CASE("prometheus: vLLM's metrics parse with types, labels and histograms") {
  auto e = parse_prometheus_text(kVllm).value();
  CHECK(e.types.at("vllm:num_requests_running") == "gauge");
  CHECK(e.types.at("vllm:time_to_first_token_seconds") == "histogram");
  CHECK(e.help.at("vllm:kv_cache_usage_perc") == "KV-cache usage. 1 means 100 percent usage.");
  CHECK(e.sum("vllm:num_requests_running") == 12.0);
  CHECK(e.sum("vllm:kv_cache_usage_perc") == 0.4375);
  CHECK(e.sum("vllm:generation_tokens_total") == 123456.0);
  CHECK(e.sum("vllm:time_to_first_token_seconds_bucket", {{"le", "+Inf"}}) == 42.0);
  CHECK(e.sum("vllm:time_to_first_token_seconds_bucket", {{"le", "0.04"}}) == 20.0);
  CHECK(e.sum("vllm:time_to_first_token_seconds_sum") == 3.25);
  CHECK_FALSE(e.sum("vllm:generation_tokens_created").has_value());  // _created dropped
  CHECK_FALSE(e.sum("vllm:num_requests_swapped").has_value());
  CHECK(e.sum("vllm:num_requests_running", {{"model_name", "other"}}) == std::nullopt);
}

TEST_CASE("prometheus: label escapes, special values, timestamps, comments") {
  auto e = parse_prometheus_text(
               "# a plain comment\n"
               "\n"
               "m{path=\"C:\\\\dir\",quote=\"say \\\"hi\\\"\",nl=\"a\\nb\",} 1 1700000000000\r\n"
               "m_nan NaN\n"
               "m_inf{x=\"1\"} +Inf\n"
               "m_ninf -Inf\n"
               "m_exp 1.5e-3\n"
               "  m_spaced   { a = \"b\" }   7\n"
               "m_empty{} 2\n")
               .value();
  REQUIRE(e.samples.size() == 7);
  CHECK(e.samples[0].label("path") == "C:\\dir");
  CHECK(e.samples[0].label("quote") == "say \"hi\"");
  CHECK(e.samples[0].label("nl") == "a\nb");
  CHECK(e.samples[0].timestamp_ms == 1700000000000);
  CHECK(std::isnan(e.samples[1].value));
  CHECK(std::isinf(e.samples[2].value));
  CHECK(e.samples[3].value < 0);
  CHECK(e.samples[4].value == Approx(0.0015));
  CHECK(e.samples[5].name == "m_spaced");
  CHECK(e.samples[5].label("a") == "b");
  CHECK(e.samples[6].value == 2);
}

TEST_CASE("prometheus: malformed lines are errors naming the line") {
  const std::vector<std::pair<std::string, std::string>> bad{
      {"ok 1\n9bad 1\n", "line 2"},    {"m{a=\"1\" 2\n", "line 1"},   {"m{a=1} 2\n", "line 1"},
      {"m{a=\"x\\q\"} 2\n", "line 1"}, {"m{a=\"open} 2\n", "line 1"}, {"m\n", "line 1"},
      {"m abc\n", "line 1"},           {"m 1 2 3\n", "line 1"},       {"m 1 notatime\n", "line 1"},
      {"m 1 1.7e58\n", "line 1"},  // found by the fuzzer: a timestamp beyond int64
      {"# TYPE m banana\n", "line 1"}, {"# HELP\n", "line 1"},        {"m{=\"x\"} 1\n", "line 1"},
  };
  for (const auto& [text, where] : bad) {
    INFO(text);
    auto r = parse_prometheus_text(text);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().code == errc::parse_error);
    CHECK(r.error().message.find(where) != std::string::npos);
  }
  CHECK(parse_prometheus_text("").value().samples.empty());
}

#include "observe/server_gauges.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep;
using namespace capsweep::observe;
using namespace std::chrono_literals;

namespace {
Exposition scrape(double running, double waiting, double kv, double gen, bool old_name = false) {
  return parse_prometheus_text(fmt::format("vllm:num_requests_running{{model_name=\"m\"}} {}\n"
                                           "vllm:num_requests_waiting{{model_name=\"m\"}} {}\n"
                                           "vllm:{}{{model_name=\"m\"}} {}\n"
                                           "vllm:generation_tokens_total{{model_name=\"m\"}} {}\n",
                                           running, waiting, old_name ? "gpu_cache_usage_perc" : "kv_cache_usage_perc",
                                           kv, gen))
      .value();
}
}  // namespace

TEST_CASE("server gauges: mean, max, deltas and the waiting trend") {
  ServerGauges g;
  g.add(1s, scrape(10, 0, 0.2, 1000));
  g.add(2s, scrape(20, 2, 0.4, 1500));
  g.add(3s, scrape(30, 4, 0.6, 2100, true));  // the older gauge name counts as KV usage
  g.add_failure("connection refused");
  auto s = g.summary();
  CHECK(s.at("scrapes") == 3);
  CHECK(s.at("scrape_failures") == 1);
  CHECK(s.at("last_scrape_error") == "connection refused");
  CHECK(s.at("mean_running").get<double>() == Approx(20));
  CHECK(s.at("max_running").get<double>() == Approx(30));
  CHECK(s.at("max_waiting").get<double>() == Approx(4));
  CHECK(s.at("mean_kv_cache_usage").get<double>() == Approx(0.4));
  CHECK(s.at("generation_tokens_delta").get<double>() == Approx(1100));
  CHECK(s.at("prompt_tokens_delta").is_null());
  CHECK(*g.waiting_slope_per_s() == Approx(2.0));
}

TEST_CASE("server gauges: no scrapes give nulls, not zeros") {
  ServerGauges g;
  auto s = g.summary();
  CHECK(s.at("scrapes") == 0);
  CHECK(s.at("mean_running").is_null());
  CHECK(s.at("waiting_slope_per_s").is_null());
  CHECK_FALSE(g.waiting_slope_per_s().has_value());
}

TEST_CASE("server gauges: the prefix cache's hit rate is its hits over its queries across the step") {
  const auto counters = [](double running, double queries, double hits) {
    return parse_prometheus_text(fmt::format("vllm:num_requests_running {}\n"
                                             "vllm:prefix_cache_queries_total {}\n"
                                             "vllm:prefix_cache_hits_total {}\n",
                                             running, queries, hits))
        .value();
  };
  ServerGauges g;
  g.add(1s, counters(4, 5000, 1000));  // what came before the step is not the step's
  g.add(2s, counters(4, 6000, 1800));
  g.add(3s, counters(99, 9000, 3400), true);  // after the step: its counters only
  const auto s = g.summary();
  CHECK(s.at("prefix_cache_queries_delta").get<double>() == Approx(4000));
  CHECK(s.at("prefix_cache_hits_delta").get<double>() == Approx(2400));
  CHECK(s.at("prefix_cache_hit_rate").get<double>() == Approx(0.6));
  CHECK(s.at("mean_running").get<double>() == Approx(4));  // the last scrape's gauges are not the step's
  CHECK(s.at("max_running").get<double>() == Approx(4));

  CHECK(s.at("prefix_cache_hit_rate_source") == "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total");

  // An older vLLM's gauge, where the counters are absent: a rate since the server started,
  // which cannot give the step's (a warm step whose own rate was 0.8 reads 0.233 there): the
  // step's rate is unknown, and the gauge is reported apart, its last value. Neither: null.
  ServerGauges old;
  old.add(1s, parse_prometheus_text("vllm:gpu_prefix_cache_hit_rate 0.2\n").value());
  old.add(2s, parse_prometheus_text("vllm:gpu_prefix_cache_hit_rate 0.233\n").value());
  const auto o = old.summary();
  CHECK(o.at("prefix_cache_hit_rate").is_null());
  CHECK(o.at("prefix_cache_hit_rate_source").is_null());
  CHECK(o.at("prefix_cache_lifetime_hit_rate").get<double>() == Approx(0.233));
  CHECK(ServerGauges().summary().at("prefix_cache_hit_rate").is_null());
  CHECK(ServerGauges().summary().at("prefix_cache_lifetime_hit_rate").is_null());
}

// The one Prometheus text writer (capsweepd's and llmsim's /metrics): exact lines, label
// escaping, and a round trip through our own parser.
#include "observe/text_writer.hpp"

#include <catch2/catch.hpp>

#include "observe/prometheus.hpp"

using namespace capsweep::observe;

TEST_CASE("text writer: histograms render cumulative buckets, sum and count") {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.1);  // inclusive upper bound
  h.observe(0.5);
  h.observe(3.0);
  std::string out;
  h.render(out, "vllm:e2e_request_latency_seconds", "help text", "model_name=\"m\"");
  CHECK(out.find("# TYPE vllm:e2e_request_latency_seconds histogram\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"0.1\"} 2\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"1\"} 3\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 4\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_sum{model_name=\"m\"} 3.65\n") != std::string::npos);
  CHECK(out.find("vllm:e2e_request_latency_seconds_count{model_name=\"m\"} 4\n") != std::string::npos);
  std::string g;
  render_sample(g, "vllm:num_requests_running", "gauge", "h", "model_name=\"m\"", 3);
  CHECK(g ==
        "# HELP vllm:num_requests_running h\n# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{model_name=\"m\"} 3\n");
  std::string plain;
  render_sample(plain, "capsweepd_steps_run_total", "counter", "h", "", 7);
  CHECK(plain.find("\ncapsweepd_steps_run_total 7\n") != std::string::npos);  // no empty braces
}

TEST_CASE("text writer: any label value is escaped and parses back to itself") {
  const std::string nasty = "a \"quoted\" \\ back\nslash";
  CHECK(label("route", nasty) == "route=\"a \\\"quoted\\\" \\\\ back\\nslash\"");
  CHECK(label("k", "bell\x07") == "k=\"bell?\"");
  std::string out;
  render_sample(out, "m", "gauge", "h", label("route", nasty), 1.5);
  Histogram h({1});
  h.observe(0.5);
  h.render(out, "lat", "h", label("route", "GET /v1/sweeps/{id}"));
  auto parsed = parse_prometheus_text(out);
  REQUIRE(parsed.has_value());
  bool found = false;
  for (const auto& s : parsed->samples) {
    if (s.name == "m") {
      found = true;
      CHECK(s.label("route") == std::string("a \"quoted\" \\ back\nslash"));
      CHECK(s.value == 1.5);
    }
  }
  CHECK(found);
}

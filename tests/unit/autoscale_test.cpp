// Autoscaler thresholds: every derived number, read back from the generated YAML.
#include "report/autoscale.hpp"

#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

using namespace capsweep;
using namespace capsweep::report;
using json = nlohmann::json;

namespace {

json succeeded_sweep(double max_rate = 36.9, double littles = 66.9) {
  return {{"id", "sw-0123456789abcdef"},
          {"status", "succeeded"},
          {"spec",
           {{"target", {{"model", "Llama-3.1-8B-Instruct"}}},
            {"slo", {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}}}},
          {"result",
           {{"kind", "sweep"},
            {"max_slo_rate_rps", max_rate},
            {"concurrency_at_max_slo",
             {{"rate_rps", max_rate}, {"littles_law", littles}, {"server_running_waiting", 57.6}}}}}};
}

// A small PromQL check for the queries we emit: balanced parentheses and braces, metric names
// of the Prometheus grammar, matchers name="value" with escaped strings, aggregations known.
bool promql_ok(const std::string& q) {
  int paren = 0, brace = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < q.size(); ++i) {
    const char c = q[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '(')
      ++paren;
    else if (c == ')')
      --paren;
    else if (c == '{')
      ++brace;
    else if (c == '}')
      --brace;
    if (paren < 0 || brace < 0 || brace > 1) return false;
  }
  if (paren != 0 || brace != 0 || in_string) return false;
  static const std::regex selector(R"re([a-zA-Z_:][a-zA-Z0-9_:]*\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)+\})re");
  static const std::regex whole(R"re(sum\(\s*SEL(\s*[+]\s*SEL)*\s*\))re");
  const std::string skeleton = std::regex_replace(q, selector, "SEL");
  return std::regex_match(skeleton, whole);
}

}  // namespace

TEST_CASE("autoscale: thresholds follow from capacity, Little's law and the utilisation") {
  AutoscaleOptions o;
  o.utilization = 0.7;
  o.base_rps = 50;
  o.peak_rps = 200;
  o.cold_start_s = 240;
  o.ns = "llm";
  const auto p = plan_autoscale(succeeded_sweep(), o).value();
  CHECK(p.capacity_rps == 36.9);
  CHECK(p.inflight_at_capacity == 66.9);
  CHECK(p.target_inflight == 46);       // floor(0.7 x 66.9)
  CHECK(p.min_replicas == 2);           // ceil(50 / (0.7 x 36.9) = 1.94)
  CHECK(p.max_replicas == 8);           // ceil(200 / 25.83 = 7.74)
  CHECK(p.queue_guard == 7);            // ceil(6.69)
  CHECK(p.scale_down_window_s == 480);  // 2 x 240
  CHECK(p.deployment == "llama-3-1-8b-instruct");
  CHECK(*p.server_inflight == 57.6);
  CHECK(promql_ok(p.inflight_query));
  CHECK(promql_ok(p.waiting_query));
  CHECK_FALSE(promql_ok("sum(vllm:num_requests_running{model_name=\"x\"}"));  // the check can fail
  CHECK_FALSE(promql_ok("sum(9bad{a=\"b\"})"));
}

TEST_CASE("autoscale: the KEDA ScaledObject reads back with every number") {
  AutoscaleOptions o;
  o.base_rps = 50;
  o.peak_rps = 200;
  o.cold_start_s = 240;
  o.model = "meta/llama \"8b\"";  // quotes survive YAML and PromQL escaping
  const auto p = plan_autoscale(succeeded_sweep(), o).value();
  const YAML::Node y = YAML::Load(keda_yaml(p));
  CHECK(y["apiVersion"].as<std::string>() == "keda.sh/v1alpha1");
  CHECK(y["kind"].as<std::string>() == "ScaledObject");
  CHECK(y["metadata"]["annotations"]["capsweep.dev/sweep-id"].as<std::string>() == "sw-0123456789abcdef");
  CHECK(std::stod(y["metadata"]["annotations"]["capsweep.dev/max-slo-rate-rps"].as<std::string>()) == Approx(36.9));
  CHECK(std::stod(y["metadata"]["annotations"]["capsweep.dev/inflight-at-capacity"].as<std::string>()) == Approx(66.9));
  const YAML::Node spec = y["spec"];
  CHECK(spec["minReplicaCount"].as<int>() == 2);
  CHECK(spec["maxReplicaCount"].as<int>() == 8);
  CHECK(spec["fallback"]["replicas"].as<int>() == 8);
  const YAML::Node behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"];
  CHECK(behavior["scaleDown"]["stabilizationWindowSeconds"].as<int>() == 480);
  REQUIRE(spec["triggers"].size() == 2);
  const YAML::Node t = spec["triggers"][0];
  CHECK(t["type"].as<std::string>() == "prometheus");
  CHECK(t["metricType"].as<std::string>() == "AverageValue");
  CHECK(t["metadata"]["threshold"].as<std::string>() == "46");
  CHECK(t["metadata"]["ignoreNullValues"].as<std::string>() == "false");
  const std::string query = t["metadata"]["query"].as<std::string>();
  CHECK(query == p.inflight_query);
  CHECK(query.rfind("sum(", 0) == 0);
  CHECK(query.find("vllm:num_requests_running") != std::string::npos);
  CHECK(query.find("vllm:num_requests_waiting") != std::string::npos);
  CHECK(query.find(R"(model_name="meta/llama \"8b\"")") != std::string::npos);
  CHECK(promql_ok(query));
  CHECK(spec["triggers"][1]["metadata"]["threshold"].as<std::string>() == "7");
  CHECK(promql_ok(spec["triggers"][1]["metadata"]["query"].as<std::string>()));
}

TEST_CASE("autoscale: the HPA reads back with the same target and behaviour") {
  AutoscaleOptions o;
  o.peak_rps = 100;
  const auto p = plan_autoscale(succeeded_sweep(), o).value();
  const std::string text = hpa_yaml(p);
  const YAML::Node y = YAML::Load(text);
  CHECK(y["apiVersion"].as<std::string>() == "autoscaling/v2");
  CHECK(y["kind"].as<std::string>() == "HorizontalPodAutoscaler");
  CHECK(y["spec"]["minReplicas"].as<int>() == 1);
  CHECK(y["spec"]["maxReplicas"].as<int>() == 4);  // ceil(100 / 25.83)
  CHECK(y["spec"]["metrics"][0]["type"].as<std::string>() == "Pods");
  CHECK(y["spec"]["metrics"][0]["pods"]["target"]["averageValue"].as<std::string>() == "46");
  CHECK(y["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"].as<int>() == 300);
  CHECK(text.find("prometheus-adapter") != std::string::npos);
  CHECK(text.find("metricsQuery") != std::string::npos);
  const json j = autoscale_json(p);
  CHECK(j["target_inflight_per_replica"] == 46);
  CHECK(j["derivation"]["target_inflight_per_replica"]["how"].get<std::string>().find("floor") == 0);
}

TEST_CASE("autoscale: errors name what is wrong") {
  json running = succeeded_sweep();
  running["status"] = "running";
  CHECK(plan_autoscale(running, {}).error().code == errc::conflict);
  json none = succeeded_sweep();
  none["result"]["max_slo_rate_rps"] = nullptr;
  CHECK(plan_autoscale(none, {}).error().field == "id");
  AutoscaleOptions bad_u;
  bad_u.utilization = 1.5;
  CHECK(plan_autoscale(succeeded_sweep(), bad_u).error().field == "/u");
  AutoscaleOptions bad_peak;
  bad_peak.base_rps = 10;
  bad_peak.peak_rps = 5;
  CHECK(plan_autoscale(succeeded_sweep(), bad_peak).error().field == "/peak_rps");
  AutoscaleOptions bad_ns;
  bad_ns.ns = "Not_Valid";
  CHECK(plan_autoscale(succeeded_sweep(), bad_ns).error().field == "/namespace");
  AutoscaleOptions neg;
  neg.cold_start_s = -1;
  CHECK(plan_autoscale(succeeded_sweep(), neg).error().field == "/cold_start_s");
}

TEST_CASE("autoscale: huge inputs are refused naming the parameter, never converted out of range") {
  // A peak that needs more replicas than an int holds (it printed maxReplicas: 1 before).
  AutoscaleOptions peak;
  peak.peak_rps = 1e12;
  auto p = plan_autoscale(succeeded_sweep(), peak);
  REQUIRE_FALSE(p.has_value());
  CHECK(p.error().field == "/peak_rps");
  CHECK(p.error().message.find("more than 100000 replicas") != std::string::npos);
  AutoscaleOptions base;
  base.base_rps = 1e300;
  CHECK(plan_autoscale(succeeded_sweep(), base).error().field == "/base_rps");
  // A cold start whose scale-down window passes the HPA's 3,600 s.
  AutoscaleOptions cold;
  cold.cold_start_s = 1e300;
  CHECK(plan_autoscale(succeeded_sweep(), cold).error().field == "/cold_start_s");
  cold.cold_start_s = 1800.5;
  CHECK(plan_autoscale(succeeded_sweep(), cold).error().field == "/cold_start_s");
  cold.cold_start_s = 1800;
  CHECK(plan_autoscale(succeeded_sweep(), cold).value().scale_down_window_s == 3600);
  // A capacity so small that any peak needs too many replicas is the same error.
  json tiny = succeeded_sweep();
  tiny["result"]["max_slo_rate_rps"] = 1e-300;
  AutoscaleOptions some;
  some.peak_rps = 1;
  CHECK(plan_autoscale(tiny, some).error().field == "/peak_rps");
  // Just within: 100,000 replicas.
  const double per_replica = 0.8 * succeeded_sweep()["result"]["max_slo_rate_rps"].get<double>();
  AutoscaleOptions most;
  most.utilization = 0.8;
  most.peak_rps = per_replica * 99'999.5;
  CHECK(plan_autoscale(succeeded_sweep(), most).value().max_replicas == 100'000);
}

TEST_CASE("autoscale: promtool parses the generated PromQL") {
  // Prometheus's own parser (promtool, Debian's prometheus package) checks both queries as
  // recording rules; a broken expression makes it exit non-zero (checked with one below).
  AutoscaleOptions o;
  o.model = "meta/llama \"8b\"";
  const auto p = plan_autoscale(succeeded_sweep(), o).value();
  const auto dir = std::filesystem::temp_directory_path() / ("capsweep-promtool-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto check = [&](const std::string& name, const std::string& expr) {
    YAML::Emitter out;
    out << YAML::BeginMap << YAML::Key << "groups" << YAML::Value << YAML::BeginSeq << YAML::BeginMap << YAML::Key
        << "name" << YAML::Value << "capsweep" << YAML::Key << "rules" << YAML::Value << YAML::BeginSeq
        << YAML::BeginMap << YAML::Key << "record" << YAML::Value << "capsweep:" + name << YAML::Key << "expr"
        << YAML::Value << expr << YAML::EndMap << YAML::EndSeq << YAML::EndMap << YAML::EndSeq << YAML::EndMap;
    const auto file = dir / (name + ".yml");
    std::ofstream(file) << out.c_str();
    const int status = std::system(("promtool check rules '" + file.string() + "' >/dev/null 2>&1").c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  CHECK(check("inflight", p.inflight_query) == 0);
  CHECK(check("waiting", p.waiting_query) == 0);
  CHECK(check("broken", "sum(vllm:num_requests_running{model_name=\"x\"}") != 0);
  std::filesystem::remove_all(dir);
}

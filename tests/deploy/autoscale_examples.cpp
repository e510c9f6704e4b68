// Writes the autoscaler objects `capsweep autoscale` generates (the same renderer the API
// uses) for a few option sets into a directory, for the schema check of deploy tests:
// keda-N.yaml (KEDA ScaledObject) and hpa-N.yaml (autoscaling/v2 HorizontalPodAutoscaler);
// and the load agents' Indexed Jobs capsweepd renders (GET /v1/sweeps/{id}/agents/job,
// `capsweep agents manifest`): agent-job-N.yaml (JSON, which is YAML).
// Usage: capsweep-autoscale-examples DIR
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "report/autoscale.hpp"
#include "sweep/agents.hpp"

using namespace capsweep;

namespace {

// A succeeded sweep as GET /v1/sweeps/{id} returns it (the fields the planner reads).
nlohmann::json succeeded_sweep(double max_rate, double littles, const char* model) {
  return {{"id", "sw-0123456789abcdef"},
          {"status", "succeeded"},
          {"spec", {{"target", {{"model", model}}}, {"slo", {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}}}},
          {"result",
           {{"kind", "sweep"},
            {"max_slo_rate_rps", max_rate},
            {"concurrency_at_max_slo",
             {{"rate_rps", max_rate}, {"littles_law", littles}, {"server_running_waiting", littles * 0.9}}}}}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fmt::print(stderr, "usage: capsweep-autoscale-examples DIR\n");
    return 2;
  }
  report::AutoscaleOptions plain;
  report::AutoscaleOptions sized;
  sized.base_rps = 40;
  sized.peak_rps = 400;
  sized.cold_start_s = 240;
  sized.utilization = 0.6;
  sized.ns = "llm-serving";
  sized.deployment = "vllm-llama";
  sized.prometheus = "http://prometheus-operated.monitoring.svc:9090";
  const std::vector<std::pair<nlohmann::json, report::AutoscaleOptions>> cases{
      {succeeded_sweep(36.9, 66.9, "Llama-3.1-8B-Instruct"), plain},
      {succeeded_sweep(5.2, 3.1, "meta-llama/Llama-3.1-70B-Instruct"), sized},
  };
  int n = 0;
  for (const auto& [s, options] : cases) {
    auto plan = report::plan_autoscale(s, options);
    if (!plan) {
      fmt::print(stderr, "autoscale: {}\n", plan.error().message);
      return 1;
    }
    ++n;
    std::ofstream(fmt::format("{}/keda-{}.yaml", argv[1], n)) << report::keda_yaml(*plan);
    std::ofstream(fmt::format("{}/hpa-{}.yaml", argv[1], n)) << report::hpa_yaml(*plan);
  }
  sweep::AgentJobSettings one;
  one.run_id = "sw-0123456789abcdef";
  sweep::AgentJobSettings many = one;
  many.agents = 16;
  many.namespace_ = "load";
  many.image = "registry.example/capsweep:0.2.0";
  many.server = "http://capsweepd.load.svc:8080";
  many.backoff_per_index = 3;
  std::ofstream(fmt::format("{}/agent-job-1.yaml", argv[1])) << sweep::agent_job(one).dump(2);
  std::ofstream(fmt::format("{}/agent-job-2.yaml", argv[1])) << sweep::agent_job(many).dump(2);
  fmt::print("{} KEDA and {} HPA objects and 2 agent Jobs written to {}\n", n, n, argv[1]);
  return 0;
}

#pragma once
// Autoscaler thresholds from a succeeded sweep, pure: per-replica capacity lambda* (the max
// SLO-compliant rate), in-flight requests at capacity L* (Little's law, cross-checked with
// the scraped running + waiting), a utilisation factor u, and from them the target in-flight
// per replica floor(u L*), replica bounds from the base and peak rates, a waiting-queue guard,
// and the scale-down window. Rendered as a KEDA ScaledObject, an autoscaling/v2 HPA (with the
// prometheus-adapter rule it needs) or JSON with the derivation.

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.hpp"

namespace capsweep::report {

struct AutoscaleOptions {
  double utilization = 0.7;            // u in (0, 1]
  std::optional<double> base_rps;      // steady traffic: sets minReplicas
  std::optional<double> peak_rps;      // peak traffic: sets maxReplicas
  std::optional<double> cold_start_s;  // a replica's start-up time: scale-down window >= 2x
  std::string model;                   // vLLM's model_name label ("" = the sweep's model)
  std::string ns = "default";          // Kubernetes namespace (and the metrics' label)
  std::string deployment;              // scale target ("" = derived from the model)
  std::string prometheus = "http://prometheus.monitoring.svc:9090";
};

struct AutoscalePlan {
  std::string sweep_id;
  double capacity_rps = 0;                // lambda*
  double inflight_at_capacity = 0;        // L*, Little's law
  std::optional<double> server_inflight;  // scraped running + waiting at that step
  double utilization = 0.7;
  int target_inflight = 1;  // per replica: floor(u L*), at least 1
  int min_replicas = 1;
  int max_replicas = 1;
  int queue_guard = 1;  // per-replica waiting requests that force a scale-up
  int scale_down_window_s = 300;
  std::string model, ns, deployment, prometheus, slo;
  std::string inflight_query;  // PromQL, summed over replicas
  std::string waiting_query;
  nlohmann::json derivation;  // every number with how it was obtained
};

// From a sweep as GET /v1/sweeps/{id} returns it. Errors: not a succeeded sweep, or no rate
// met the SLO (conflict, field "id"); options out of range (invalid, field "/u",
// "/base_rps", "/peak_rps", "/cold_start_s", "/model", "/namespace", "/deployment").
Result<AutoscalePlan> plan_autoscale(const nlohmann::json& sweep, const AutoscaleOptions& options);

std::string keda_yaml(const AutoscalePlan& p);
std::string hpa_yaml(const AutoscalePlan& p);
nlohmann::json autoscale_json(const AutoscalePlan& p);

}  // namespace capsweep::report

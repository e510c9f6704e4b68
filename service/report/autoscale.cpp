#include "report/autoscale.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/json_access.hpp"
#include "core/numeric.hpp"
#include "core/slo.hpp"

namespace capsweep::report {

namespace {

using json = nlohmann::json;

// Kubernetes names: lower-case alphanumerics and '-', at most 63 characters.
bool k8s_name(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::islower(c) || std::isdigit(c) || c == '-'; });
}

std::string k8s_name_from(const std::string& model) {
  std::string out;
  for (unsigned char c : model) {
    if (std::isalnum(c))
      out += static_cast<char>(std::tolower(c));
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  if (out.size() > 50) out.resize(50);
  return out.empty() ? "llm" : out;
}

// The body of a double-quoted string, as PromQL and YAML both read it: backslash and quote
// escaped, newlines as \n.
std::string escape_quoted(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

// A YAML double-quoted scalar.
std::string yq(const std::string& s) {
  return "\"" + escape_quoted(s) + "\"";
}

const json& at(const json& j, const char* key) {
  return json_at(j, key);
}

std::string annotations(const AutoscalePlan& p, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  std::string out;
  out += fmt::format("{}capsweep.dev/sweep-id: {}\n", pad, yq(p.sweep_id));
  out += fmt::format("{}capsweep.dev/max-slo-rate-rps: {}\n", pad, yq(fmt::format("{:.3f}", p.capacity_rps)));
  out +=
      fmt::format("{}capsweep.dev/inflight-at-capacity: {}\n", pad, yq(fmt::format("{:.2f}", p.inflight_at_capacity)));
  out += fmt::format("{}capsweep.dev/server-inflight-at-capacity: {}\n", pad,
                     yq(p.server_inflight ? fmt::format("{:.2f}", *p.server_inflight) : std::string("not scraped")));
  out += fmt::format("{}capsweep.dev/utilization: {}\n", pad, yq(fmt::format("{:g}", p.utilization)));
  out += fmt::format("{}capsweep.dev/target-inflight-per-replica: {}\n", pad, yq(std::to_string(p.target_inflight)));
  out += fmt::format("{}capsweep.dev/slo: {}\n", pad, yq(p.slo));
  return out;
}

std::string behavior(const AutoscalePlan& p, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  return fmt::format(
      "{0}behavior:\n"
      "{0}  scaleDown:\n"
      "{0}    stabilizationWindowSeconds: {1}\n"
      "{0}    policies:\n"
      "{0}      - type: Percent\n"
      "{0}        value: 50\n"
      "{0}        periodSeconds: 60\n"
      "{0}  scaleUp:\n"
      "{0}    stabilizationWindowSeconds: 0\n"
      "{0}    policies:\n"
      "{0}      - type: Percent\n"
      "{0}        value: 100\n"
      "{0}        periodSeconds: 30\n",
      pad, p.scale_down_window_s);
}

}  // namespace

namespace {
constexpr int kMaxReplicas = 100'000;    // far above any fleet; below every integer limit
constexpr double kMaxColdStartS = 1800;  // 2 x 1800 s: the HPA's longest stabilisation window
}  // namespace

namespace {

// What plan_autoscale refuses: an unfinished job, a check or a concurrency sweep, a sweep with
// no capacity, and parameters out of their range (each error naming the parameter).
std::optional<Error> check_autoscale_inputs(const json& sweep, const AutoscaleOptions& o) {
  if (at(sweep, "status") != "succeeded" || at(at(sweep, "result"), "kind") != "sweep") {
    return Error{errc::conflict, "autoscale thresholds need a succeeded sweep (not a check, not unfinished)", "id"};
  }
  const json& r = sweep["result"];
  if (at(r, "mode") == "concurrency") {
    return Error{errc::conflict,
                 "autoscale thresholds need a rate sweep's capacity; this is a concurrency sweep (users, not a rate)",
                 "id"};
  }
  if (!at(r, "max_slo_rate_rps").is_number() || !(r["max_slo_rate_rps"].get<double>() > 0)) {
    return Error{errc::conflict, "no rate met the SLO in this sweep: there is no capacity to scale on", "id"};
  }
  if (!(o.utilization > 0 && o.utilization <= 1)) return invalid("/u", "the utilisation factor must be in (0, 1]");
  for (auto [v, f] : {std::pair{o.base_rps, "/base_rps"}, std::pair{o.peak_rps, "/peak_rps"},
                      std::pair{o.cold_start_s, "/cold_start_s"}}) {
    if (v && !(*v >= 0 && std::isfinite(*v))) return invalid(f, "must be a non-negative number");
  }
  // The scale-down window is 2 x the cold start, and an HPA's stabilisation window is at most
  // 3,600 s.
  if (o.cold_start_s && *o.cold_start_s > kMaxColdStartS) {
    return invalid("/cold_start_s", fmt::format("must be at most {} s (the scale-down window, 2 x cold_start_s, "
                                                "is at most the HPA's 3600 s)",
                                                kMaxColdStartS));
  }
  if (o.base_rps && o.peak_rps && *o.peak_rps < *o.base_rps) return invalid("/peak_rps", "must not be below base_rps");
  if (!o.ns.empty() && !k8s_name(o.ns))
    return invalid("/namespace", "must be a Kubernetes name (lower-case, digits, '-')");
  if (!o.deployment.empty() && !k8s_name(o.deployment))
    return invalid("/deployment", "must be a Kubernetes name (lower-case, digits, '-')");

  return std::nullopt;
}

// The replica bounds for the base and peak rates (min 1, max 10 without them): refused,
// naming the parameter, past what a Deployment is given.
std::optional<Error> size_replicas(const AutoscaleOptions& o, AutoscalePlan& p) {
  const double per_replica_rps = o.utilization * p.capacity_rps;
  // Replicas for a rate: refused (naming the parameter) past what a Deployment is given.
  const auto replicas_for = [&](double rps, const char* field) -> Result<int> {
    const auto n = checked_integer<int>(std::ceil(rps / per_replica_rps));
    if (!n || *n > kMaxReplicas) {
      return invalid(field, fmt::format("{} req/s at {} x {:.4g} req/s a replica needs more than {} replicas", rps,
                                        o.utilization, p.capacity_rps, kMaxReplicas));
    }
    return std::max(1, *n);
  };
  p.min_replicas = 1;
  if (o.base_rps) {
    auto n = replicas_for(*o.base_rps, "/base_rps");
    if (!n) return n.error();
    p.min_replicas = *n;
  }
  p.max_replicas = std::max(p.min_replicas, 10);
  if (o.peak_rps) {
    auto n = replicas_for(*o.peak_rps, "/peak_rps");
    if (!n) return n.error();
    p.max_replicas = std::max(p.min_replicas, *n);
  }
  return std::nullopt;
}

// How each figure was derived, as the manifests' annotations and the API answer show it.
json derivation(const AutoscaleOptions& o, const AutoscalePlan& p) {
  return {
      {"capacity_rps",
       {{"value", p.capacity_rps},
        {"how", "max_slo_rate_rps of the sweep: the highest rate that met the SLO with no failing rate below it"}}},
      {"inflight_at_capacity",
       {{"value", p.inflight_at_capacity}, {"how", "Little's law: capacity_rps x mean E2EL at that step"}}},
      {"server_inflight_at_capacity",
       {{"value", p.server_inflight ? json(*p.server_inflight) : json(nullptr)},
        {"how", "mean scraped vllm:num_requests_running + num_requests_waiting at that step (cross-check)"}}},
      {"utilization", {{"value", p.utilization}, {"how", "headroom factor u: replicas run at u of their capacity"}}},
      {"target_inflight_per_replica",
       {{"value", p.target_inflight}, {"how", "floor(u x inflight_at_capacity), at least 1"}}},
      {"min_replicas",
       {{"value", p.min_replicas},
        {"how", o.base_rps ? "ceil(base_rps / (u x capacity_rps)), at least 1" : "1 (no base_rps given)"}}},
      {"max_replicas",
       {{"value", p.max_replicas},
        {"how", o.peak_rps ? "ceil(peak_rps / (u x capacity_rps)), at least min_replicas"
                           : "max(min_replicas, 10) (no peak_rps given)"}}},
      {"queue_guard_per_replica",
       {{"value", p.queue_guard},
        {"how", "ceil(0.1 x inflight_at_capacity): a sustained waiting queue means a replica is past capacity"}}},
      {"scale_down_window_s",
       {{"value", p.scale_down_window_s},
        {"how", o.cold_start_s ? "max(300, 2 x cold_start_s)" : "300 (no cold_start_s given)"}}},
  };
}

}  // namespace

Result<AutoscalePlan> plan_autoscale(const json& sweep, const AutoscaleOptions& o) {
  if (auto e = check_autoscale_inputs(sweep, o)) return *e;
  const json& r = sweep["result"];
  AutoscalePlan p;
  p.sweep_id = at(sweep, "id").is_string() ? sweep["id"].get<std::string>() : "";
  p.capacity_rps = r["max_slo_rate_rps"].get<double>();
  const json& c = at(r, "concurrency_at_max_slo");
  p.inflight_at_capacity = at(c, "littles_law").is_number() ? c["littles_law"].get<double>() : 0;
  if (at(c, "server_running_waiting").is_number()) p.server_inflight = c["server_running_waiting"].get<double>();
  if (!(p.inflight_at_capacity > 0))
    return Error{errc::conflict, "the sweep recorded no in-flight figure at capacity", "id"};
  p.utilization = o.utilization;
  p.target_inflight = std::max(1, saturate<int>(std::floor(o.utilization * p.inflight_at_capacity)));
  if (auto e = size_replicas(o, p)) return *e;
  p.queue_guard = std::max(1, saturate<int>(std::ceil(0.1 * p.inflight_at_capacity)));
  p.scale_down_window_s = o.cold_start_s ? std::max(300, saturate<int>(std::ceil(2 * *o.cold_start_s))) : 300;
  const json& spec = at(sweep, "spec");
  const std::string sweep_model =
      at(at(spec, "target"), "model").is_string() ? spec["target"]["model"].get<std::string>() : "";
  p.model = o.model.empty() ? sweep_model : o.model;
  if (p.model.empty()) return invalid("/model", "is required: the model_name label of the vLLM metrics");
  p.ns = o.ns;
  p.deployment = o.deployment.empty() ? k8s_name_from(p.model) : o.deployment;
  p.prometheus = o.prometheus;
  p.slo = describe_slo(at(spec, "slo"));
  const std::string labels =
      fmt::format("model_name=\"{}\",namespace=\"{}\"", escape_quoted(p.model), escape_quoted(p.ns));
  p.inflight_query = fmt::format("sum(vllm:num_requests_running{{{0}}} + vllm:num_requests_waiting{{{0}}})", labels);
  p.waiting_query = fmt::format("sum(vllm:num_requests_waiting{{{0}}})", labels);
  p.derivation = derivation(o, p);
  return p;
}

std::string keda_yaml(const AutoscalePlan& p) {
  std::string y;
  y += fmt::format("# KEDA ScaledObject derived by capsweep from sweep {}.\n", p.sweep_id);
  y += fmt::format("# Per replica: {:.2f} req/s within SLO ({}), {:.1f} requests in flight at that rate;\n",
                   p.capacity_rps, p.slo, p.inflight_at_capacity);
  y += fmt::format("# target {} in flight per replica (u = {:g}).\n", p.target_inflight, p.utilization);
  y += "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n";
  y += fmt::format("  name: {}\n  namespace: {}\n  annotations:\n", yq(p.deployment + "-capsweep"), yq(p.ns));
  y += annotations(p, 4);
  y += "spec:\n  scaleTargetRef:\n";
  y += fmt::format("    name: {}\n", yq(p.deployment));
  y += fmt::format("  minReplicaCount: {}\n  maxReplicaCount: {}\n", p.min_replicas, p.max_replicas);
  y += "  pollingInterval: 15\n";
  y += fmt::format("  fallback:\n    failureThreshold: 3\n    replicas: {}\n", p.max_replicas);
  y += "  advanced:\n    horizontalPodAutoscalerConfig:\n";
  y += behavior(p, 6);
  y += "  triggers:\n";
  y += "    - type: prometheus\n      name: inflight\n      metricType: AverageValue\n      metadata:\n";
  y += fmt::format(
      "        serverAddress: {}\n        query: {}\n        threshold: {}\n        ignoreNullValues: \"false\"\n",
      yq(p.prometheus), yq(p.inflight_query), yq(std::to_string(p.target_inflight)));
  y += "    - type: prometheus\n      name: queue-guard\n      metricType: AverageValue\n      metadata:\n";
  y += fmt::format(
      "        serverAddress: {}\n        query: {}\n        threshold: {}\n        ignoreNullValues: \"false\"\n",
      yq(p.prometheus), yq(p.waiting_query), yq(std::to_string(p.queue_guard)));
  return y;
}

std::string hpa_yaml(const AutoscalePlan& p) {
  std::string y;
  y += fmt::format("# autoscaling/v2 HorizontalPodAutoscaler derived by capsweep from sweep {}.\n", p.sweep_id);
  y += fmt::format("# Per replica: {:.2f} req/s within SLO ({}), {:.1f} requests in flight at that rate.\n",
                   p.capacity_rps, p.slo, p.inflight_at_capacity);
  y += "# It scales on the Pods metric vllm_requests_in_flight, which prometheus-adapter must serve:\n";
  y += "#   rules:\n";
  y += "#     - seriesQuery: 'vllm:num_requests_running{namespace!=\"\",pod!=\"\"}'\n";
  y += "#       resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}\n";
  y += "#       name: {as: \"vllm_requests_in_flight\"}\n";
  y += "#       metricsQuery: 'sum(vllm:num_requests_running{<<.LabelMatchers>>} + "
       "vllm:num_requests_waiting{<<.LabelMatchers>>}) by (<<.GroupBy>>)'\n";
  y += "#     - seriesQuery: 'vllm:num_requests_waiting{namespace!=\"\",pod!=\"\"}'\n";
  y += "#       resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}\n";
  y += "#       name: {as: \"vllm_requests_waiting\"}\n";
  y += "#       metricsQuery: 'sum(vllm:num_requests_waiting{<<.LabelMatchers>>}) by (<<.GroupBy>>)'\n";
  y += "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n";
  y += fmt::format("  name: {}\n  namespace: {}\n  annotations:\n", yq(p.deployment + "-capsweep"), yq(p.ns));
  y += annotations(p, 4);
  y += "spec:\n  scaleTargetRef:\n    apiVersion: apps/v1\n    kind: Deployment\n";
  y += fmt::format("    name: {}\n", yq(p.deployment));
  y += fmt::format("  minReplicas: {}\n  maxReplicas: {}\n", p.min_replicas, p.max_replicas);
  y += "  metrics:\n";
  y += "    - type: Pods\n      pods:\n        metric:\n          name: vllm_requests_in_flight\n";
  y += fmt::format("        target:\n          type: AverageValue\n          averageValue: {}\n",
                   yq(std::to_string(p.target_inflight)));
  y += "    - type: Pods\n      pods:\n        metric:\n          name: vllm_requests_waiting\n";
  y += fmt::format("        target:\n          type: AverageValue\n          averageValue: {}\n",
                   yq(std::to_string(p.queue_guard)));
  y += behavior(p, 2);
  return y;
}

json autoscale_json(const AutoscalePlan& p) {
  return {{"sweep_id", p.sweep_id},
          {"capacity_rps", p.capacity_rps},
          {"inflight_at_capacity", p.inflight_at_capacity},
          {"server_inflight_at_capacity", p.server_inflight ? json(*p.server_inflight) : json(nullptr)},
          {"utilization", p.utilization},
          {"target_inflight_per_replica", p.target_inflight},
          {"min_replicas", p.min_replicas},
          {"max_replicas", p.max_replicas},
          {"queue_guard_per_replica", p.queue_guard},
          {"scale_down_window_s", p.scale_down_window_s},
          {"model", p.model},
          {"namespace", p.ns},
          {"deployment", p.deployment},
          {"queries", {{"inflight", p.inflight_query}, {"waiting", p.waiting_query}}},
          {"derivation", p.derivation}};
}

}  // namespace capsweep::report

// Handlers of the exports of a sweep: steps.csv, requests.csv, the HTML report and the
// autoscaler thresholds.

#include "api/handlers.hpp"
#include "report/autoscale.hpp"
#include "report/html.hpp"

#include <fmt/format.h>

namespace capsweep::api {

namespace {
using json = nlohmann::json;
}  // namespace

// GET /v1/sweeps/{id}/report: the self-contained HTML report.
Answer get_report(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  return text_response(c.req, "text/html; charset=utf-8", report::render_report(sweep_view(env, *row), steps_view(env, c.id)));
}

// GET /v1/sweeps/{id}/steps.csv: one line per step with its main figures.
Answer get_steps_csv(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  static const std::array<const char*, 19> keys{
      "completed", "failed", "request_throughput", "output_throughput", "request_goodput", "achieved_rate_rps",
      "mean_ttft_ms", "p50_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p95_tpot_ms", "mean_itl_ms",
      "p95_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p95_e2el_ms", "p99_schedule_lag_ms", "duration_s"};
  std::string csv = "step,kind,phase,offered_rate_rps,verdict,generator_limited";
  for (const char* k : keys) csv += std::string(",") + k;
  csv += "\n";
  for (const auto& s : env.ctx.store->steps(c.id)) {
    csv += fmt::format("{},{},{},{},{},{}", s.index, s.kind, s.phase,
                       s.offered_rate_rps ? fmt::format("{:.4f}", *s.offered_rate_rps) : std::string(), s.verdict,
                       s.generator_limited ? 1 : 0);
    for (const char* k : keys) {
      auto it = s.summary.find(k);
      csv += ",";
      if (it != s.summary.end() && it->is_number()) csv += fmt::format("{:.4f}", it->get<double>());
    }
    csv += "\n";
  }
  return text_response(c.req, "text/csv; charset=utf-8", std::move(csv), c.id + "-steps.csv");
}

// GET /v1/sweeps/{id}/requests.csv: one line per request of every stored step.
Answer get_requests_csv(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  std::string csv =
      "step,request,scheduled_ms,dispatched_ms,sent_ms,finished_ms,ttft_ms,e2el_ms,input_tokens,output_tokens,chunks,outcome\n";
  auto num = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string(); };
  env.ctx.store->for_each_request(c.id, [&](int step, const store::RequestRow& r) {
    csv += fmt::format("{},{},{:.3f},{},{},{},{},{},{},{},{},{}\n", step, r.index, r.scheduled_ms, num(r.dispatched_ms),
                       num(r.sent_ms), num(r.finished_ms), num(r.ttft_ms), num(r.e2el_ms), r.input_tokens,
                       r.output_tokens, r.chunks, r.outcome);
  });
  return text_response(c.req, "text/csv; charset=utf-8", std::move(csv), c.id + "-requests.csv");
}

// GET /v1/sweeps/{id}/autoscale?format=keda|hpa|json&u=&base_rps=&peak_rps=&cold_start_s=
//     &model=&namespace=&deployment=&prometheus=: thresholds derived from the result.
Answer get_autoscale(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  report::AutoscaleOptions o;
  std::string format = "keda";
  for (const auto& [key, value] : c.query) {
    auto number = [&](std::optional<double>& out) -> std::optional<ApiError> {
      try {
        std::size_t used = 0;
        out = std::stod(value, &used);
        if (used != value.size()) throw std::invalid_argument(key);
      } catch (const std::exception&) {
        return api_error(errc::invalid_argument, key + " must be a number", "/" + key);
      }
      return std::nullopt;
    };
    std::optional<ApiError> e;
    if (key == "format") format = value;
    else if (key == "u") {
      std::optional<double> u;
      e = number(u);
      if (u) o.utilization = *u;
    } else if (key == "base_rps") e = number(o.base_rps);
    else if (key == "peak_rps") e = number(o.peak_rps);
    else if (key == "cold_start_s") e = number(o.cold_start_s);
    else if (key == "model") o.model = value;
    else if (key == "namespace") o.ns = value;
    else if (key == "deployment") o.deployment = value;
    else if (key == "prometheus") o.prometheus = value;
    else e = api_error(errc::invalid_argument, "unknown parameter '" + key + "'", "/" + key);
    if (e) return *e;
  }
  if (format != "keda" && format != "hpa" && format != "json") {
    return api_error(errc::invalid_argument, "format must be keda, hpa or json", "/format");
  }
  auto plan = report::plan_autoscale(sweep_view(env, *row), o);
  if (!plan) return from_error(plan.error());
  if (format == "json") return json_ok(c.req, bhttp::status::ok, report::autoscale_json(*plan));
  return text_response(c.req, "application/yaml; charset=utf-8",
                       format == "keda" ? report::keda_yaml(*plan) : report::hpa_yaml(*plan));
}

}  // namespace capsweep::api

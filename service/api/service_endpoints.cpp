// The service's own endpoints: liveness, readiness and Prometheus metrics, plus the answer
// builders every handler uses.

#include <fmt/format.h>

#include <array>

#include "api/handlers.hpp"

namespace capsweep::api {

namespace {
using json = nlohmann::json;
}  // namespace

Response json_ok(const Request& req, bhttp::status status, const json& body) {
  // Stored text may hold what a target sent: invalid UTF-8 is replaced, never thrown on.
  return http::json_response(req, status, body.dump(-1, ' ', false, json::error_handler_t::replace));
}

Response text_response(const Request& req, std::string content_type, std::string body, std::string filename) {
  Response res{bhttp::status::ok, req.version()};
  res.set(bhttp::field::content_type, content_type);
  if (!filename.empty())
    res.set(bhttp::field::content_disposition, fmt::format("attachment; filename=\"{}\"", filename));
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

Response no_content(const Request& req) {
  Response res{bhttp::status::no_content, req.version()};
  res.keep_alive(req.keep_alive());
  res.prepare_payload();
  return res;
}

void LatencyHistogram::observe(const std::string& route, double seconds) {
  static const std::vector<double> kBounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
  std::lock_guard lock(mutex_);
  series_.try_emplace(route, kBounds).first->second.observe(seconds);
}

void LatencyHistogram::render(std::string& out) const {
  constexpr const char* kName = "capsweepd_api_request_duration_seconds";
  std::lock_guard lock(mutex_);
  observe::render_header(out, kName, "histogram", "Time to answer an API request.");
  for (const auto& [route, h] : series_) h.render(out, kName, "", observe::label("route", route), false);
}

// GET /healthz: the process answers. Never touches the database (runs on the I/O thread).
Answer healthz(Env&, const Call& c) {
  return json_ok(c.req, bhttp::status::ok, {{"status", "ok"}});
}

// GET /readyz: the database takes writes and the workers run.
Answer readyz(Env& env, const Call& c) {
  const bool db = env.ctx.store->writable();
  const bool workers = env.ctx.manager->workers_alive();
  return json_ok(c.req, db && workers ? bhttp::status::ok : bhttp::status::service_unavailable,
                 {{"status", db && workers ? "ready" : "not ready"}, {"database", db}, {"workers", workers}});
}

// GET /metrics: capsweepd's own, Prometheus text format 0.0.4.
namespace {

// The last window of each scenario running here, one gauge per figure with the job's id, so a
// dashboard can follow a scenario while it runs.
void render_scenario_windows(std::string& out, const std::vector<std::pair<std::string, nlohmann::json>>& windows) {
  static const std::array<std::pair<const char*, const char*>, 9> kFigures{{
      {"offered_rps", "The profile's offered rate in the scenario's last window."},
      {"completed", "Requests completed in the scenario's last window."},
      {"in_flight", "Requests in flight at the end of the scenario's last window."},
      {"p95_ttft_ms", "TTFT p95 of the requests scheduled in the scenario's last window."},
      {"p95_itl_ms", "ITL p95 in the scenario's last window."},
      {"rejected", "Fast rejections (429/503 at once) in the scenario's last window."},
      {"ready", "Ready replicas read at the end of the scenario's last window."},
      {"desired", "Desired replicas read at the end of the scenario's last window."},
      {"t_start_s", "Start of the scenario's last window, seconds into the scenario."},
  }};
  for (const auto& [key, help] : kFigures) {
    const std::string name = std::string("capsweepd_scenario_window_") + key;
    bool header = false;
    for (const auto& [id, w] : windows) {
      const auto it = w.find(key);
      if (it == w.end() || !it->is_number()) continue;
      if (!header) observe::render_header(out, name, "gauge", help);
      header = true;
      observe::render_value(out, name, observe::label("sweep", id), it->get<double>());
    }
  }
}

}  // namespace

Answer metrics(Env& env, const Call& c) {
  std::string out;
  observe::render_header(out, "capsweepd_sweeps", "gauge", "Sweeps in the store by status.");
  for (const auto& [status, n] : env.ctx.store->count_by_status()) {
    observe::render_value(out, "capsweepd_sweeps", observe::label("status", status), static_cast<double>(n));
  }
  auto counter = [&out](const char* name, const char* help, std::uint64_t value) {
    observe::render_sample(out, name, "counter", help, "", static_cast<double>(value));
  };
  const auto& st = env.ctx.manager->stats();
  counter("capsweepd_steps_run_total", "Steps run and stored since start.", st.steps_run.load());
  counter("capsweepd_requests_sent_total", "Requests sent to targets since start.", st.requests_sent.load());
  counter("capsweepd_sweeps_created_total", "Sweeps accepted since start.", env.sweeps_created.load());
  counter("capsweepd_sweeps_rejected_total", "Specs refused since start.", env.sweeps_rejected.load());
  counter("capsweepd_api_requests_refused_total", "API requests refused by the Host, Origin or Content-Type guards.",
          env.requests_refused.load());
  observe::render_sample(out, "capsweepd_database_bytes", "gauge", "Size of the database file with its WAL.", "",
                         static_cast<double>(env.ctx.store->size_bytes()));
  render_scenario_windows(out, env.ctx.manager->scenario_windows());
  env.latency.render(out);
  return text_response(c.req, "text/plain; version=0.0.4; charset=utf-8", std::move(out));
}

}  // namespace capsweep::api

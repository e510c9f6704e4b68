// The service's own endpoints: liveness, readiness and Prometheus metrics, plus the answer
// builders every handler uses.

#include "api/handlers.hpp"

#include <fmt/format.h>

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
  if (!filename.empty()) res.set(bhttp::field::content_disposition, fmt::format("attachment; filename=\"{}\"", filename));
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
  std::lock_guard lock(mutex_);
  auto& s = series_[route];
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) ++s.buckets[i];
  }
  ++s.count;
  s.sum += seconds;
}

void LatencyHistogram::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  out += "# HELP capsweepd_api_request_duration_seconds Time to answer an API request.\n"
         "# TYPE capsweepd_api_request_duration_seconds histogram\n";
  for (const auto& [route, s] : series_) {
    for (std::size_t i = 0; i < kBounds.size(); ++i) {
      out += fmt::format("capsweepd_api_request_duration_seconds_bucket{{route=\"{}\",le=\"{}\"}} {}\n", route, kBounds[i], s.buckets[i]);
    }
    out += fmt::format("capsweepd_api_request_duration_seconds_bucket{{route=\"{}\",le=\"+Inf\"}} {}\n", route, s.count);
    out += fmt::format("capsweepd_api_request_duration_seconds_sum{{route=\"{}\"}} {}\n", route, s.sum);
    out += fmt::format("capsweepd_api_request_duration_seconds_count{{route=\"{}\"}} {}\n", route, s.count);
  }
}

// GET /healthz: the process answers. Never touches the database (runs on the I/O thread).
Answer healthz(Env&, const Call& c) { return json_ok(c.req, bhttp::status::ok, {{"status", "ok"}}); }

// GET /readyz: the database takes writes and the workers run.
Answer readyz(Env& env, const Call& c) {
  const bool db = env.ctx.store->writable();
  const bool workers = env.ctx.manager->workers_alive();
  return json_ok(c.req, db && workers ? bhttp::status::ok : bhttp::status::service_unavailable,
                 {{"status", db && workers ? "ready" : "not ready"}, {"database", db}, {"workers", workers}});
}

// GET /metrics: capsweepd's own, Prometheus text format 0.0.4.
Answer metrics(Env& env, const Call& c) {
  std::string out;
  auto counter = [&out](const char* name, const char* help, std::uint64_t value) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} counter\n{0} {2}\n", name, help, value);
  };
  out += "# HELP capsweepd_sweeps Sweeps in the store by status.\n# TYPE capsweepd_sweeps gauge\n";
  for (const auto& [status, n] : env.ctx.store->count_by_status()) {
    out += fmt::format("capsweepd_sweeps{{status=\"{}\"}} {}\n", status, n);
  }
  const auto& st = env.ctx.manager->stats();
  counter("capsweepd_steps_run_total", "Steps run and stored since start.", st.steps_run.load());
  counter("capsweepd_requests_sent_total", "Requests sent to targets since start.", st.requests_sent.load());
  counter("capsweepd_sweeps_created_total", "Sweeps accepted since start.", env.sweeps_created.load());
  counter("capsweepd_sweeps_rejected_total", "Specs refused since start.", env.sweeps_rejected.load());
  counter("capsweepd_api_requests_refused_total", "API requests refused by the Host, Origin or Content-Type guards.",
          env.requests_refused.load());
  out += fmt::format("# HELP capsweepd_database_bytes Size of the database file with its WAL.\n"
                     "# TYPE capsweepd_database_bytes gauge\ncapsweepd_database_bytes {}\n",
                     env.ctx.store->size_bytes());
  env.latency.render(out);
  return text_response(c.req, "text/plain; version=0.0.4; charset=utf-8", std::move(out));
}

}  // namespace capsweep::api

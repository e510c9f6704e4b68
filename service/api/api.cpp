#include "api/api.hpp"

#include "api/schema.hpp"
#include "report/autoscale.hpp"
#include "report/html.hpp"
#include "llm/target.hpp"
#include "sweep/spec.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <array>
#include <cctype>
#include <map>
#include <variant>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace capsweep::api {

namespace {

using json = nlohmann::json;
using http::Request;
using http::Response;
namespace bhttp = boost::beast::http;

// An API failure: the status and the error body.
struct ApiError {
  bhttp::status status = bhttp::status::bad_request;
  std::string code;
  std::string message;
  std::string field;
};

bhttp::status status_of(errc code) {
  switch (code) {
    case errc::invalid_argument:
    case errc::parse_error: return bhttp::status::bad_request;
    case errc::not_found: return bhttp::status::not_found;
    case errc::conflict: return bhttp::status::conflict;
    case errc::forbidden: return bhttp::status::forbidden;
    case errc::unavailable: return bhttp::status::service_unavailable;
  }
  return bhttp::status::bad_request;
}

ApiError from_error(const Error& e) {
  return {status_of(e.code), std::string(to_string(e.code)), e.message, e.field};
}

std::string error_body(const ApiError& e) {
  return json{{"error", {{"code", e.code}, {"message", e.message}, {"field", e.field}}}}.dump();
}

// Latency histogram of the API's own requests, per route.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 11> kBounds{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
  void observe(const std::string& route, double seconds) {
    std::lock_guard lock(mutex_);
    auto& s = series_[route];
    for (std::size_t i = 0; i < kBounds.size(); ++i) {
      if (seconds <= kBounds[i]) ++s.buckets[i];
    }
    ++s.count;
    s.sum += seconds;
  }
  void render(std::string& out) {
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

 private:
  struct Series {
    std::array<std::uint64_t, kBounds.size()> buckets{};
    std::uint64_t count = 0;
    double sum = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Series> series_;
};

std::string new_sweep_id() {
  std::array<unsigned char, 8> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) throw std::runtime_error("no randomness");
  std::string id = "sw-";
  for (unsigned char b : bytes) id += fmt::format("{:02x}", b);
  return id;
}

// Splits "/v1/sweeps/abc/steps" into segments.
std::vector<std::string> segments(std::string_view path) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    const auto j = path.find('/', i);
    out.emplace_back(path.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j;
  }
  return out;
}

// "%2F" -> "/", "+" -> " "; nullopt for a broken escape.
std::optional<std::string> percent_decode(std::string_view in) {
  std::string out;
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size() || !std::isxdigit(static_cast<unsigned char>(in[i + 1])) ||
          !std::isxdigit(static_cast<unsigned char>(in[i + 2]))) {
        return std::nullopt;
      }
      out += static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

struct Target {
  std::string path;
  std::map<std::string, std::string> query;
};

// Splits an origin-form request target into its path and decoded query parameters.
std::optional<Target> parse_request_target(std::string_view t) {
  if (t.empty() || t.front() != '/') return std::nullopt;
  Target out;
  const auto q = t.find('?');
  auto path = percent_decode(t.substr(0, q));
  if (!path) return std::nullopt;
  out.path = *path;
  if (q == std::string_view::npos) return out;
  std::string_view rest = t.substr(q + 1);
  while (!rest.empty()) {
    const auto amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const auto eq = pair.find('=');
    auto key = percent_decode(pair.substr(0, eq));
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!key || !value) return std::nullopt;
    if (!key->empty()) out.query[*key] = *value;
    if (amp == std::string_view::npos) break;
    rest = rest.substr(amp + 1);
  }
  return out;
}

struct Call {
  const Request& req;
  std::string id;                          // the {id} of the path
  std::map<std::string, std::string> query;
};

using Answer = std::variant<Response, ApiError>;

}  // namespace

struct Api::Impl {
  ApiContext ctx;
  SchemaValidator spec_validator{embedded_schema("sweep-spec.schema.json")};
  LatencyHistogram latency;
  std::atomic<std::uint64_t> sweeps_created{0};
  std::atomic<std::uint64_t> sweeps_rejected{0};

  enum class Role { none, read, submit };
  struct Route {
    bhttp::verb method;
    std::string pattern;  // "/v1/sweeps/{id}/steps"
    Role needs;
    Answer (Impl::*handle)(const Call&);
  };
  std::vector<Route> routes;

  explicit Impl(ApiContext c) : ctx(c) {
    routes = {
        {bhttp::verb::post, "/v1/sweeps", Role::submit, &Impl::create_sweep},
        {bhttp::verb::get, "/v1/sweeps", Role::read, &Impl::list_sweeps},
        {bhttp::verb::get, "/v1/sweeps/{id}", Role::read, &Impl::get_sweep},
        {bhttp::verb::delete_, "/v1/sweeps/{id}", Role::submit, &Impl::delete_sweep},
        {bhttp::verb::get, "/v1/sweeps/{id}/steps", Role::read, &Impl::get_steps},
        {bhttp::verb::get, "/v1/sweeps/{id}/requests.csv", Role::read, &Impl::get_requests_csv},
        {bhttp::verb::post, "/v1/sweeps/{id}/cancel", Role::submit, &Impl::cancel_sweep},
        {bhttp::verb::get, "/v1/sweeps/{id}/autoscale", Role::read, &Impl::get_autoscale},
        {bhttp::verb::get, "/v1/sweeps/{id}/report", Role::read, &Impl::get_report},
        {bhttp::verb::get, "/v1/sweeps/{id}/steps.csv", Role::read, &Impl::get_steps_csv},
        {bhttp::verb::get, "/healthz", Role::none, &Impl::healthz},
        {bhttp::verb::get, "/readyz", Role::read, &Impl::readyz},
        {bhttp::verb::get, "/metrics", Role::read, &Impl::metrics},
    };
  }

  Response json_ok(const Request& req, bhttp::status status, const json& body) {
    return http::json_response(req, status, body.dump());
  }

  // Which role the request's bearer token carries (none without a valid token).
  Role role_of(const Request& req) const {
    if (ctx.config->tokens.empty()) return Role::submit;
    auto it = req.find(bhttp::field::authorization);
    if (it == req.end()) return Role::none;
    std::string_view v = it->value();
    if (v.size() < 7 || (v.substr(0, 7) != "Bearer " && v.substr(0, 7) != "bearer ")) return Role::none;
    const std::string_view token = v.substr(7);
    Role best = Role::none;
    for (const auto& t : ctx.config->tokens) {
      if (t.token.size() == token.size() && CRYPTO_memcmp(t.token.data(), token.data(), token.size()) == 0) {
        best = t.can_submit ? Role::submit : Role::read;
      }
    }
    return best;
  }

  Response dispatch(const Request& req) {
    const auto started = std::chrono::steady_clock::now();
    std::string route_name = "unmatched";
    Answer answer = ApiError{bhttp::status::not_found, "not_found", "no such endpoint", ""};
    try {
      answer = route(req, route_name);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s capsweepd: %s %s: internal error: %s\n", store::utc_now().c_str(),
                   std::string(req.method_string()).c_str(), std::string(req.target()).c_str(), e.what());
      answer = ApiError{bhttp::status::internal_server_error, "internal", "internal error; see the service log", ""};
    }
    Response res = std::holds_alternative<Response>(answer)
                       ? std::move(std::get<Response>(answer))
                       : http::json_response(req, std::get<ApiError>(answer).status, error_body(std::get<ApiError>(answer)));
    if (res.result() == bhttp::status::unauthorized) res.set(bhttp::field::www_authenticate, "Bearer");
    latency.observe(route_name, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return res;
  }

  Answer route(const Request& req, std::string& route_name) {
    auto url = parse_request_target(req.target());
    if (!url) return ApiError{bhttp::status::bad_request, "invalid_argument", "malformed request target", ""};
    const auto path = segments(url->path);
    Call call{req, {}, url->query};
    std::vector<const Route*> matched;
    for (const auto& r : routes) {
      const auto pat = segments(r.pattern);
      if (pat.size() != path.size()) continue;
      bool ok = true;
      std::string id;
      for (std::size_t i = 0; i < pat.size() && ok; ++i) {
        if (pat[i] == "{id}") id = path[i];
        else ok = pat[i] == path[i];
      }
      if (!ok) continue;
      if (r.method == req.method()) {
        route_name = fmt::format("{} {}", std::string(bhttp::to_string(r.method)), r.pattern);
        const Role role = role_of(req);
        if (r.needs != Role::none && role == Role::none) {
          return ApiError{bhttp::status::unauthorized, "unauthorized", "a bearer token is required (Authorization: Bearer ...)", ""};
        }
        if (r.needs == Role::submit && role != Role::submit) {
          return ApiError{bhttp::status::forbidden, "forbidden", "this token may only read; submitting needs the 'submit' role", ""};
        }
        call.id = id;
        return (this->*r.handle)(call);
      }
      matched.push_back(&r);
    }
    if (!matched.empty()) {
      std::string allow;
      for (const auto* r : matched) allow += (allow.empty() ? "" : ", ") + std::string(bhttp::to_string(r->method));
      Response res = http::json_response(req, bhttp::status::method_not_allowed,
                                         error_body({bhttp::status::method_not_allowed, "method_not_allowed",
                                                     fmt::format("{} is not allowed here; allowed: {}", std::string(req.method_string()), allow), ""}));
      res.set(bhttp::field::allow, allow);
      return res;
    }
    return ApiError{bhttp::status::not_found, "not_found", fmt::format("no endpoint {}", url->path), ""};
  }

  // --- handlers -------------------------------------------------------------------------

  // POST /v1/sweeps: validate the spec, fill defaults, check limits and the allow-list, queue it.
  Answer create_sweep(const Call& c) {
    auto reject = [this](ApiError e) {
      ++sweeps_rejected;
      return e;
    };
    json doc = json::parse(c.req.body(), nullptr, false);
    if (doc.is_discarded()) {
      return reject({bhttp::status::bad_request, "parse_error", "the body is not valid JSON", ""});
    }
    if (auto ok = spec_validator.validate(doc); !ok) return reject(from_error(ok.error()));
    spec_validator.apply_defaults(doc);
    if (doc.value("kind", "sweep") == "sweep" && !doc.contains("sweep")) {
      doc["sweep"] = json::object();
      spec_validator.apply_defaults(doc);
    }
    auto spec = sweep::parse_job_spec(doc);
    if (!spec) return reject(from_error(spec.error()));
    // The allow-list, before anything is stored or sent.
    if (!ctx.config->allow.allows(spec->target.host)) {
      return reject({bhttp::status::forbidden, "forbidden",
                     fmt::format("target host '{}' is not in the service's allow_targets", spec->target.host), "/target/base_url"});
    }
    if (!spec->metrics_url.empty()) {
      auto m = llm::parse_base_url({}, spec->metrics_url, "/target/metrics_url");
      if (!m || !ctx.config->allow.allows(m->host)) {
        return reject({bhttp::status::forbidden, "forbidden", "metrics_url host is not in the service's allow_targets",
                       "/target/metrics_url"});
      }
    }
    if (auto e = check_limits(*spec, doc)) return reject(*e);
    if (ctx.store->count_status("queued") >= ctx.config->limits.max_queued_sweeps) {
      return reject({bhttp::status::too_many_requests, "queue_full",
                     fmt::format("{} sweeps are queued already (limits.max_queued_sweeps)", ctx.config->limits.max_queued_sweeps), ""});
    }
    auto split = sweep::split_secrets(doc);
    store::SweepRow row;
    row.id = new_sweep_id();
    row.name = spec->name;
    row.kind = spec->kind == sweep::JobKind::check ? "check" : "sweep";
    row.target_key = spec->base_url;
    row.status = "queued";
    row.spec = split.visible;
    row.secret_headers = split.secret_headers;
    row.created_at = store::utc_now();
    ctx.store->insert_sweep(row);
    ++sweeps_created;
    ctx.manager->notify();
    row.updated_at = row.created_at;  // the answer shows it as queued, whatever a worker does next
    Response res = json_ok(c.req, bhttp::status::created, view(row));
    res.set(bhttp::field::location, "/v1/sweeps/" + row.id);
    return res;
  }

  std::optional<ApiError> check_limits(const sweep::JobSpec& spec, json& doc) const {
    const Limits& l = ctx.config->limits;
    auto over = [](std::string field, std::string what) {
      return ApiError{bhttp::status::bad_request, "invalid_argument", std::move(what), std::move(field)};
    };
    if (spec.kind == sweep::JobKind::sweep) {
      const auto& s = spec.sweep;
      if (to_s(s.warmup + s.step_duration) > l.max_step_duration_s) {
        return over("/sweep/step_duration_s", fmt::format("warm-up + step exceed the service's limit of {} s per step", l.max_step_duration_s));
      }
      if (s.max_rate_rps && *s.max_rate_rps > l.max_rate_rps) {
        return over("/sweep/max_rate_rps", fmt::format("exceeds the service's limit of {} req/s", l.max_rate_rps));
      }
      if (!s.max_rate_rps) doc["sweep"]["max_rate_rps"] = l.max_rate_rps;  // escalation stops there
      if (s.probe_concurrency > l.max_connections_per_sweep) {
        return over("/sweep/probe_concurrency", fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
      }
      if (s.max_concurrency > l.max_connections_per_sweep) {
        return over("/sweep/max_concurrency", fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
      }
    } else {
      const auto& k = spec.check;
      if (std::isfinite(k.rate_rps) && k.rate_rps > l.max_rate_rps) {
        return over("/check/rate_rps", fmt::format("exceeds the service's limit of {} req/s", l.max_rate_rps));
      }
      if (to_s(k.warmup + k.duration) > l.max_step_duration_s) {
        return over("/check/duration_s", fmt::format("warm-up + duration exceed the service's limit of {} s per step", l.max_step_duration_s));
      }
      if (k.max_concurrency > l.max_connections_per_sweep) {
        return over("/check/max_concurrency", fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
      }
    }
    return std::nullopt;
  }

  json progress_of(const store::SweepRow& row) const {
    if (row.status == "running") {
      if (auto live = ctx.manager->live_progress(row.id)) return *live;
    }
    json p = row.progress.is_object() ? row.progress : json::object();
    if (row.status == "queued") p = {{"phase", "queued"}, {"step", 0}, {"steps_planned", nullptr}, {"percent", 0}};
    if (row.status == "succeeded") {
      p["phase"] = "done";
      p["percent"] = 100;
      p["eta_s"] = 0;
    }
    for (const char* k : {"phase", "step", "steps_planned", "percent"}) {
      if (!p.contains(k)) p[k] = nullptr;
    }
    return p;
  }

  json view(const store::SweepRow& row) const {
    return {{"id", row.id},
            {"name", row.name},
            {"kind", row.kind},
            {"status", row.status},
            {"created_at", row.created_at},
            {"started_at", row.started_at.empty() ? json(nullptr) : json(row.started_at)},
            {"finished_at", row.finished_at.empty() ? json(nullptr) : json(row.finished_at)},
            {"updated_at", row.updated_at},
            {"progress", progress_of(row)},
            {"result", row.result},
            {"error", row.error.empty() ? json(nullptr) : json(row.error)},
            {"resumable", row.resumable},
            {"spec", row.spec}};
  }

  std::optional<store::SweepRow> find(const Call& c) { return ctx.store->sweep(c.id); }
  static ApiError no_sweep(const Call& c) {
    return {bhttp::status::not_found, "not_found", fmt::format("no sweep '{}'", c.id), "id"};
  }

  // GET /v1/sweeps?status=&limit=&offset=: newest first.
  Answer list_sweeps(const Call& c) {
    std::optional<std::string> status;
    if (auto it = c.query.find("status"); it != c.query.end()) {
      static const std::array<std::string_view, 5> known{"queued", "running", "succeeded", "failed", "cancelled"};
      if (std::find(known.begin(), known.end(), it->second) == known.end()) {
        return ApiError{bhttp::status::bad_request, "invalid_argument",
                        "status must be queued, running, succeeded, failed or cancelled", "status"};
      }
      status = it->second;
    }
    auto int_param = [&](const char* key, int fallback, int lo, int hi) -> std::optional<int> {
      auto it = c.query.find(key);
      if (it == c.query.end()) return fallback;
      try {
        std::size_t used = 0;
        const int v = std::stoi(it->second, &used);
        if (used != it->second.size() || v < lo || v > hi) return std::nullopt;
        return v;
      } catch (const std::exception&) {
        return std::nullopt;
      }
    };
    const auto limit = int_param("limit", 50, 1, 1000);
    if (!limit) return ApiError{bhttp::status::bad_request, "invalid_argument", "limit must be an integer in [1, 1000]", "limit"};
    const auto offset = int_param("offset", 0, 0, 1'000'000'000);
    if (!offset) return ApiError{bhttp::status::bad_request, "invalid_argument", "offset must be a non-negative integer", "offset"};
    json items = json::array();
    for (const auto& row : ctx.store->list_sweeps(status, *limit, *offset)) {
      json v = view(row);
      v.erase("spec");
      items.push_back(std::move(v));
    }
    return json_ok(c.req, bhttp::status::ok, {{"sweeps", items}, {"limit", *limit}, {"offset", *offset}});
  }

  // GET /v1/sweeps/{id}: status, progress (phase, step i of planned, percent, ETA), result.
  Answer get_sweep(const Call& c) {
    auto row = find(c);
    if (!row) return no_sweep(c);
    return json_ok(c.req, bhttp::status::ok, view(*row));
  }

  // DELETE /v1/sweeps/{id}: refused while running.
  Answer delete_sweep(const Call& c) {
    auto row = find(c);
    if (!row) return no_sweep(c);
    if (row->status == "running" || !ctx.store->delete_sweep(c.id)) {
      return ApiError{bhttp::status::conflict, "conflict", "the sweep is running: cancel it first", "id"};
    }
    Response res{bhttp::status::no_content, c.req.version()};
    res.keep_alive(c.req.keep_alive());
    res.prepare_payload();
    return res;
  }

  // GET /v1/sweeps/{id}/steps: every stored step with its summary.
  Answer get_steps(const Call& c) {
    auto row = find(c);
    if (!row) return no_sweep(c);
    const json steps = steps_json(c.id);
    return json_ok(c.req, bhttp::status::ok, {{"id", c.id}, {"status", row->status}, {"steps", steps}});
  }

  json steps_json(const std::string& id) {
    json steps = json::array();
    for (const auto& s : ctx.store->steps(id)) {
      steps.push_back({{"index", s.index},
                       {"kind", s.kind},
                       {"phase", s.phase},
                       {"offered_rate_rps", s.offered_rate_rps ? json(*s.offered_rate_rps) : json(nullptr)},
                       {"verdict", s.verdict},
                       {"generator_limited", s.generator_limited},
                       {"summary", s.summary},
                       {"evaluation", s.evaluation},
                       {"server", s.server},
                       {"started_at", s.started_at},
                       {"finished_at", s.finished_at}});
    }
    return steps;
  }

  Response text_response(const Request& req, std::string content_type, std::string body, std::string filename = {}) {
    Response res{bhttp::status::ok, req.version()};
    res.set(bhttp::field::content_type, content_type);
    if (!filename.empty()) res.set(bhttp::field::content_disposition, fmt::format("attachment; filename=\"{}\"", filename));
    res.keep_alive(req.keep_alive());
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  // GET /v1/sweeps/{id}/report: the self-contained HTML report.
  Answer get_report(const Call& c) {
    auto row = find(c);
    if (!row) return no_sweep(c);
    return text_response(c.req, "text/html; charset=utf-8", report::render_report(view(*row), steps_json(c.id)));
  }

  // GET /v1/sweeps/{id}/steps.csv: one line per step with its main figures.
  Answer get_steps_csv(const Call& c) {
    auto row = find(c);
    if (!row) return no_sweep(c);
    static const std::array<const char*, 19> keys{
        "completed", "failed", "request_throughput", "output_throughput", "request_goodput", "achieved_rate_rps",
        "mean_ttft_ms", "p50_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p95_tpot_ms", "mean_itl_ms",
        "p95_itl_ms", "p99_itl_ms", "mean_e2el_ms", "p95_e2el_ms", "p99_schedule_lag_ms", "duration_s"};
    std::string csv = "step,kind,phase,offered_rate_rps,verdict,generator_limited";
    for (const char* k : keys) csv += std::string(",") + k;
    csv += "\n";
    for (const auto& s : ctx.store->steps(c.id)) {
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
  Answer get_requests_csv(const Call& c) {
    auto row = find(c);
    if (!row) return no_sweep(c);
    std::string csv =
        "step,request,scheduled_ms,dispatched_ms,sent_ms,finished_ms,ttft_ms,e2el_ms,input_tokens,output_tokens,chunks,outcome\n";
    auto num = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string(); };
    ctx.store->for_each_request(c.id, [&](int step, const store::RequestRow& r) {
      csv += fmt::format("{},{},{:.3f},{},{},{},{},{},{},{},{},{}\n", step, r.index, r.scheduled_ms, num(r.dispatched_ms),
                         num(r.sent_ms), num(r.finished_ms), num(r.ttft_ms), num(r.e2el_ms), r.input_tokens,
                         r.output_tokens, r.chunks, r.outcome);
    });
    return text_response(c.req, "text/csv; charset=utf-8", std::move(csv), c.id + "-requests.csv");
  }

  // POST /v1/sweeps/{id}/cancel: stops it; stored steps stay.
  Answer cancel_sweep(const Call& c) {
    switch (ctx.manager->cancel(c.id)) {
      case sweep::CancelOutcome::not_found: return no_sweep(c);
      case sweep::CancelOutcome::already_finished: {
        auto row = find(c);
        return ApiError{bhttp::status::conflict, "conflict",
                        fmt::format("the sweep already ended ({})", row ? row->status : "deleted"), "id"};
      }
      case sweep::CancelOutcome::cancelled:
      case sweep::CancelOutcome::stopping: break;
    }
    auto row = find(c);
    json body = {{"id", c.id}, {"status", row ? row->status : "cancelled"}};
    return json_ok(c.req, bhttp::status::accepted, body);
  }

  // GET /v1/sweeps/{id}/autoscale?format=keda|hpa|json&u=&base_rps=&peak_rps=&cold_start_s=
  //     &model=&namespace=&deployment=&prometheus=: thresholds derived from the result.
  Answer get_autoscale(const Call& c) {
    auto row = find(c);
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
          return ApiError{bhttp::status::bad_request, "invalid_argument", key + " must be a number", "/" + key};
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
      else e = ApiError{bhttp::status::bad_request, "invalid_argument", "unknown parameter '" + key + "'", "/" + key};
      if (e) return *e;
    }
    if (format != "keda" && format != "hpa" && format != "json") {
      return ApiError{bhttp::status::bad_request, "invalid_argument", "format must be keda, hpa or json", "/format"};
    }
    auto plan = report::plan_autoscale(view(*row), o);
    if (!plan) return from_error(plan.error());
    if (format == "json") return json_ok(c.req, bhttp::status::ok, report::autoscale_json(*plan));
    return text_response(c.req, "application/yaml; charset=utf-8",
                         format == "keda" ? report::keda_yaml(*plan) : report::hpa_yaml(*plan));
  }

  // GET /healthz: the process answers.
  Answer healthz(const Call& c) { return json_ok(c.req, bhttp::status::ok, {{"status", "ok"}}); }

  // GET /readyz: the database takes writes and the workers run.
  Answer readyz(const Call& c) {
    const bool db = ctx.store->writable();
    const bool workers = ctx.manager->workers_alive();
    return json_ok(c.req, db && workers ? bhttp::status::ok : bhttp::status::service_unavailable,
                   {{"status", db && workers ? "ready" : "not ready"}, {"database", db}, {"workers", workers}});
  }

  // GET /metrics: capsweepd's own, Prometheus text format 0.0.4.
  Answer metrics(const Call& c) {
    std::string out;
    out += "# HELP capsweepd_sweeps Sweeps in the store by status.\n# TYPE capsweepd_sweeps gauge\n";
    for (const auto& [status, n] : ctx.store->count_by_status()) {
      out += fmt::format("capsweepd_sweeps{{status=\"{}\"}} {}\n", status, n);
    }
    const auto& st = ctx.manager->stats();
    out += fmt::format("# HELP capsweepd_steps_run_total Steps run and stored since start.\n"
                       "# TYPE capsweepd_steps_run_total counter\ncapsweepd_steps_run_total {}\n",
                       st.steps_run.load());
    out += fmt::format("# HELP capsweepd_requests_sent_total Requests sent to targets since start.\n"
                       "# TYPE capsweepd_requests_sent_total counter\ncapsweepd_requests_sent_total {}\n",
                       st.requests_sent.load());
    out += fmt::format("# HELP capsweepd_sweeps_created_total Sweeps accepted since start.\n"
                       "# TYPE capsweepd_sweeps_created_total counter\ncapsweepd_sweeps_created_total {}\n",
                       sweeps_created.load());
    out += fmt::format("# HELP capsweepd_sweeps_rejected_total Specs refused since start.\n"
                       "# TYPE capsweepd_sweeps_rejected_total counter\ncapsweepd_sweeps_rejected_total {}\n",
                       sweeps_rejected.load());
    latency.render(out);
    return text_response(c.req, "text/plain; version=0.0.4; charset=utf-8", std::move(out));
  }
};

Api::Api(ApiContext ctx) : impl_(std::make_unique<Impl>(ctx)) {}
Api::~Api() = default;

std::vector<std::pair<std::string, std::string>> Api::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : impl_->routes) out.emplace_back(std::string(bhttp::to_string(r.method)), r.pattern);
  return out;
}

http::Handler Api::handler() {
  return [impl = impl_.get()](Request& req, boost::beast::tcp_stream&) -> boost::asio::awaitable<http::Reply> {
    http::Reply reply;
    reply.response = impl->dispatch(req);
    reply.keep_alive = reply.response->keep_alive();
    co_return reply;
  };
}

}  // namespace capsweep::api

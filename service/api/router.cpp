#include "api/router.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>

#include <boost/url/parse.hpp>
#include <chrono>
#include <cstdio>

#include "api/guard.hpp"
#include "core/log.hpp"
#include "core/text.hpp"

namespace capsweep::api {

namespace {

// The request target split: decoded path segments and query parameters.
struct Target {
  std::vector<std::string> segments;
  std::map<std::string, std::string> query;
};

std::optional<Target> parse_target(std::string_view text) {
  auto url = boost::urls::parse_origin_form(text);
  if (!url) return std::nullopt;
  Target t;
  for (auto seg : url->segments()) {
    if (!seg.empty()) t.segments.push_back(seg);
  }
  for (auto p : url->params()) {
    if (!p.key.empty()) t.query[p.key] = p.value;
  }
  return t;
}

std::vector<std::string> pattern_segments(std::string_view pattern) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < pattern.size()) {
    const auto j = pattern.find('/', i + 1);
    std::string seg(pattern.substr(i + 1, j == std::string_view::npos ? std::string_view::npos : j - i - 1));
    if (!seg.empty()) out.push_back(std::move(seg));
    if (j == std::string_view::npos) break;
    i = j;
  }
  return out;
}

// Which role the request's bearer token carries (submit for everyone when no token is configured).
Role role_of(const ServiceConfig& config, const Request& req) {
  if (config.tokens.empty()) return Role::submit;
  auto it = req.find(bhttp::field::authorization);
  if (it == req.end()) return Role::none;
  std::string_view v = it->value();
  if (v.size() < 7 || (v.substr(0, 7) != "Bearer " && v.substr(0, 7) != "bearer ")) return Role::none;
  const std::string_view token = v.substr(7);
  Role best = Role::none;
  for (const auto& t : config.tokens) {
    if (t.token.size() == token.size() && CRYPTO_memcmp(t.token.data(), token.data(), token.size()) == 0) {
      best = t.agent ? Role::agent : t.can_submit ? Role::submit : Role::read;
    }
  }
  return best;
}

std::string_view header(const Request& req, bhttp::field f) {
  auto it = req.find(f);
  return it == req.end() ? std::string_view() : std::string_view(it->value().data(), it->value().size());
}

// Host and Origin, before routing (Content-Type once the route is known).
std::optional<Error> guard(const Env& env, const Request& req) {
  const ServiceConfig& config = *env.ctx.config;
  const std::string listen_host = host_of(config.listen);
  if (auto e = check_host(header(req, bhttp::field::host), config.allowed_hosts, listen_host)) return e;
  return check_origin(header(req, bhttp::field::origin), config.allowed_hosts, listen_host);
}

}  // namespace

RouteMatch match_request(const Request& req) {
  RouteMatch m;
  auto target = parse_target(req.target());
  if (!target) {
    m.malformed = true;
    return m;
  }
  const auto& path = target->segments;
  for (const auto& r : route_table()) {
    if (r.segments.size() != path.size()) continue;
    bool ok = true;
    std::string id;
    for (std::size_t i = 0; i < path.size() && ok; ++i) {
      if (r.segments[i] == "{id}")
        id = path[i];
      else
        ok = r.segments[i] == path[i];
    }
    if (!ok) continue;
    if (r.method == req.method()) {
      m.route = &r;
      m.id = std::move(id);
      m.query = std::move(target->query);
      m.allow.clear();
      return m;
    }
    m.allow += (m.allow.empty() ? "" : ", ") + std::string(bhttp::to_string(r.method));
  }
  return m;
}

Resolved resolve(Env& env, const Request& req, RouteMatch m) {
  Resolved out;
  if (auto e = guard(env, req)) {
    ++env.requests_refused;
    out.answer = from_error(*e);
    return out;
  }
  if (m.malformed) {
    out.answer = api_error(errc::invalid_argument, "malformed request target");
    return out;
  }
  // A body is JSON (or, for uploads, JSON Lines), never a "simple" type a cross-site form can send.
  if (auto e = check_json_content_type(header(req, bhttp::field::content_type), req.body().size(),
                                       m.route && m.route->upload)) {
    ++env.requests_refused;
    out.answer = from_error(*e);
    return out;
  }
  if (!m.route) {
    if (m.allow.empty()) {
      out.answer = api_error(errc::not_found, fmt::format("no endpoint {}", std::string(req.target()).substr(0, 200)));
      return out;
    }
    Response res = http::json_response(
        req, bhttp::status::method_not_allowed,
        error_body(api_error(errc::method_not_allowed, fmt::format("{} is not allowed here; allowed: {}",
                                                                   std::string(req.method_string()), m.allow))));
    res.set(bhttp::field::allow, m.allow);
    out.answer = std::move(res);
    return out;
  }
  const Route& r = *m.route;
  out.route_name = fmt::format("{} {}", std::string(bhttp::to_string(r.method)), r.pattern);
  const Role role = role_of(*env.ctx.config, req);
  if (r.needs != Role::none && role == Role::none) {
    out.answer = api_error(errc::unauthorized, "a bearer token is required (Authorization: Bearer ...)");
    return out;
  }
  if (r.needs == Role::agent && role != Role::agent && !env.ctx.config->tokens.empty()) {
    out.answer = api_error(errc::forbidden, "the agent protocol needs a token of role 'agent'");
    return out;
  }
  if (r.needs != Role::agent && r.needs != Role::none && role == Role::agent) {
    out.answer = api_error(errc::forbidden, "an agent's token may only speak the agent protocol (/v1/agents/...)");
    return out;
  }
  if (r.needs == Role::submit && role != Role::submit) {
    out.answer = api_error(errc::forbidden, "this token may only read; submitting needs the 'submit' role");
    return out;
  }
  out.route = &r;
  out.id = std::move(m.id);
  out.query = std::move(m.query);
  return out;
}

namespace {

// Runs `f` and turns what it throws into the answers that disclose nothing.
template <class F>
Answer guarded(const Request& req, F&& f) {
  try {
    return f();
  } catch (const store::StoreError& e) {
    // The database is locked, full or broken: the request may be retried; nothing was stored.
    log::error(fmt::format("{} {}: database: {}", req.method_string(), printable_ascii(req.target(), 200), e.what()));
    return api_error(errc::unavailable, "the database cannot be used now; retry later");
  } catch (const std::exception& e) {
    log::error(
        fmt::format("{} {}: internal error: {}", req.method_string(), printable_ascii(req.target(), 200), e.what()));
    return api_error(errc::internal, "internal error; see the service log");
  }
}

}  // namespace

const std::vector<Route>& route_table() {
  using enum bhttp::verb;
  static const std::vector<Route> routes = [] {
    std::vector<Route> t{
        {.method = post, .pattern = "/v1/sweeps", .needs = Role::submit, .handle = &create_sweep},
        {.method = get, .pattern = "/v1/sweeps", .handle = &list_sweeps},
        {.method = get, .pattern = "/v1/sweeps/{id}", .handle = &get_sweep},
        {.method = delete_, .pattern = "/v1/sweeps/{id}", .needs = Role::submit, .handle = &delete_sweep},
        {.method = get, .pattern = "/v1/sweeps/{id}/steps", .handle = &get_steps},
        {.method = get, .pattern = "/v1/sweeps/{id}/requests.csv", .stream = &stream_requests_csv},
        {.method = get, .pattern = "/v1/sweeps/{id}/requests.json", .handle = &get_requests_json},
        {.method = get, .pattern = "/v1/sweeps/{id}/quality.jsonl", .stream = &stream_quality_jsonl},
        {.method = post, .pattern = "/v1/sweeps/{id}/cancel", .needs = Role::submit, .handle = &cancel_sweep},
        {.method = get, .pattern = "/v1/sweeps/{id}/autoscale", .handle = &get_autoscale},
        {.method = get, .pattern = "/v1/sweeps/{id}/report", .handle = &get_report},
        {.method = get, .pattern = "/v1/sweeps/{id}/steps.csv", .handle = &get_steps_csv},
        {.method = get, .pattern = "/v1/sweeps/{id}/windows", .handle = &get_windows},
        {.method = get, .pattern = "/v1/sweeps/{id}/windows.csv", .handle = &get_windows_csv},
        {.method = post, .pattern = "/v1/datasets", .needs = Role::submit, .handle = &create_dataset, .upload = true},
        {.method = get, .pattern = "/v1/datasets", .handle = &list_datasets},
        {.method = get, .pattern = "/v1/datasets/{id}", .handle = &get_dataset},
        {.method = delete_, .pattern = "/v1/datasets/{id}", .needs = Role::submit, .handle = &delete_dataset},
        {.method = get, .pattern = "/healthz", .needs = Role::none, .handle = &healthz, .blocking = false},
        {.method = get, .pattern = "/readyz", .needs = Role::none, .handle = &readyz},  // probes carry no token
        {.method = get, .pattern = "/metrics", .handle = &metrics},
        {.method = get, .pattern = "/v1/sweeps/{id}/agents", .handle = &get_agents},
        {.method = get, .pattern = "/v1/sweeps/{id}/agents/job", .handle = &get_agents_job},
        // The agent protocol (schema/agent-protocol.schema.json): the clock's answer on the
        // I/O thread, so that its timestamps are not a worker queue's wait.
        {.method = post, .pattern = "/v1/agents/register", .needs = Role::agent, .handle = &agent_register},
        {.method = post,
         .pattern = "/v1/agents/clock",
         .needs = Role::agent,
         .handle = &agent_clock,
         .blocking = false},
        {.method = post, .pattern = "/v1/agents/poll", .needs = Role::agent, .handle = &agent_poll},
        {.method = post, .pattern = "/v1/agents/heartbeat", .needs = Role::agent, .handle = &agent_heartbeat},
        {.method = post, .pattern = "/v1/agents/records", .needs = Role::agent, .handle = &agent_records},
    };
    for (auto& r : t) r.segments = pattern_segments(r.pattern);
    return t;
  }();
  return routes;
}

Placement placement_of(const RouteMatch& m) {
  if (!m.route) return Placement::io_thread;  // a 400, 404 or 405: nothing to look up
  if (m.route->stream) return Placement::stream;
  return m.route->blocking ? Placement::worker : Placement::io_thread;
}

bool is_upload(const Request& req) {
  const RouteMatch m = match_request(req);
  return m.route && m.route->upload;
}

Response respond(Env& env, const Request& req, Answer answer, const std::string& route_name,
                 std::chrono::steady_clock::time_point started) {
  Response res = std::holds_alternative<Response>(answer) ? std::move(std::get<Response>(answer))
                                                          : http::json_response(req, std::get<ApiError>(answer).status,
                                                                                error_body(std::get<ApiError>(answer)));
  if (res.result() == bhttp::status::unauthorized) res.set(bhttp::field::www_authenticate, "Bearer");
  env.latency.observe(route_name, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return res;
}

Response dispatch(Env& env, const Request& req, RouteMatch m) {
  const auto started = std::chrono::steady_clock::now();
  Resolved r;
  Answer answer = guarded(req, [&]() -> Answer {
    r = resolve(env, req, std::move(m));
    if (r.answer) return std::move(*r.answer);
    if (!r.route->handle) throw std::logic_error("a streaming route was dispatched without its stream");
    return r.route->handle(env, Call{req, std::move(r.id), std::move(r.query)});
  });
  return respond(env, req, std::move(answer), r.route_name, started);
}

}  // namespace capsweep::api

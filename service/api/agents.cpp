// Load agents: a job's agents as they stand (GET /v1/sweeps/{id}/agents), the Kubernetes
// Indexed Job that runs them (GET /v1/sweeps/{id}/agents/job), and the agent protocol's
// routes (POST /v1/agents/...), each a thin call into the manager's agent hub.

#include "sweep/agents.hpp"

#include <fmt/format.h>

#include <chrono>

#include "api/guard.hpp"
#include "api/handlers.hpp"
#include "loadgen/agent_hub.hpp"
#include "sweep/spec.hpp"

namespace capsweep::api {

namespace {

using json = nlohmann::json;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The message of an agent's request, or the error to answer: nesting within the service's
// limit before it is parsed (a deep document would exhaust the stack).
std::variant<json, ApiError> message(const Env& env, const Call& c) {
  const int depth = env.ctx.config->limits.max_json_depth;
  if (auto deep = json_too_deep(c.req.body(), depth)) {
    return api_error(errc::invalid_argument, fmt::format("nested deeper than the service's limit of {} levels", depth),
                     *deep);
  }
  json msg = json::parse(c.req.body(), nullptr, false);
  if (msg.is_discarded() || !msg.is_object()) {
    return api_error(errc::invalid_argument, "the body must be a JSON object (schema/agent-protocol.schema.json)");
  }
  return msg;
}

template <class F>
Answer hub_call(Env& env, const Call& c, F&& f) {
  auto msg = message(env, c);
  if (auto* e = std::get_if<ApiError>(&msg)) return *e;
  Result<json> answer = f(env.ctx.manager->agent_hub(), std::get<json>(msg));
  if (!answer) return from_error(answer.error());
  return json_ok(c.req, bhttp::status::ok, *answer);
}

}  // namespace

Answer get_agents(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  const json stored = row->spec;
  const json live = env.ctx.manager->agent_hub().status(c.id);
  return json_ok(c.req, bhttp::status::ok,
                 {{"id", c.id}, {"agents", stored.value("agents", json(nullptr))}, {"live", live}});
}

Answer get_agents_job(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  const json n = row->spec.value("agents", json(nullptr));
  if (!n.is_number_integer()) {
    return api_error(errc::conflict,
                     fmt::format("sweep {} runs on capsweepd's own engine: its spec has no agents", c.id), "/agents");
  }
  sweep::AgentJobSettings s;
  s.run_id = c.id;
  s.agents = n.get<std::uint32_t>();
  for (const auto& [key, value] : c.query) {
    if (key == "image")
      s.image = value;
    else if (key == "server")
      s.server = value;
    else if (key == "secret")
      s.secret = value;
    else if (key == "secret_key")
      s.secret_key = value;
    else if (key == "namespace")
      s.namespace_ = value;
    else
      return api_error(errc::invalid_argument,
                       fmt::format("unknown parameter '{}': image, server, secret, secret_key or namespace", key),
                       "/" + key);
    if (value.empty() && key != "namespace") {
      return api_error(errc::invalid_argument, fmt::format("{} must not be empty", key), "/" + key);
    }
  }
  if (auto bad = sweep::agent_job_names_error(s)) return from_error(*bad);
  return json_ok(c.req, bhttp::status::ok, sweep::agent_job(s));
}

// POST /v1/agents/register: only for a stored job that runs on agents; one that has ended
// answers "done" (its agents exit 0, so their Job completes), keeping nothing.
Answer agent_register(Env& env, const Call& c) {
  return hub_call(env, c, [&env](loadgen::AgentHub& h, const json& m) -> Result<json> {
    const json run = m.value("run_id", json(nullptr));
    if (!run.is_string() || run.get<std::string>().empty() || run.get<std::string>().size() > 128) {
      return invalid("/run_id", "run_id must be the job's id (1 to 128 characters)");
    }
    auto row = env.ctx.store->sweep(run.get<std::string>());
    if (!row) return Error{errc::not_found, fmt::format("no job '{}'", run.get<std::string>()), "/run_id"};
    const json n = row->spec.value("agents", json(nullptr));
    if (!n.is_number_unsigned() || n.get<std::uint64_t>() == 0) {
      return Error{errc::conflict, fmt::format("job {} runs on capsweepd's own engine: it has no agents", row->id),
                   "/run_id"};
    }
    if (row->status != "queued" && row->status != "running") {
      return Result<json>(boost::system::in_place_value, json{{"state", "done"}});
    }
    return h.register_agent(m, n.get<std::uint32_t>());
  });
}

Answer agent_clock(Env& env, const Call& c) {
  const std::int64_t t2 = steady_ns();
  auto msg = message(env, c);
  if (auto* e = std::get_if<ApiError>(&msg)) return *e;
  const json& m = std::get<json>(msg);
  const auto t1 = m.find("t1_ns");
  if (t1 == m.end() || !t1->is_number_integer()) {
    return api_error(errc::invalid_argument, "t1_ns must be the agent's send time in whole nanoseconds", "/t1_ns");
  }
  return json_ok(c.req, bhttp::status::ok, {{"t1_ns", *t1}, {"t2_ns", t2}, {"t3_ns", steady_ns()}});
}

Answer agent_poll(Env& env, const Call& c) {
  return hub_call(env, c, [](loadgen::AgentHub& h, const json& m) { return h.poll(m); });
}

Answer agent_heartbeat(Env& env, const Call& c) {
  return hub_call(env, c, [](loadgen::AgentHub& h, const json& m) { return h.heartbeat(m); });
}

Answer agent_records(Env& env, const Call& c) {
  return hub_call(env, c, [](loadgen::AgentHub& h, const json& m) { return h.records(m); });
}

}  // namespace capsweep::api

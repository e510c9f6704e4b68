// What a step returns, as the store keeps it: its summary and the client's backlog.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "llm/session_shapes.hpp"
#include "loadgen/step_runner.hpp"

namespace capsweep::loadgen {

namespace {

// Agent i sent the requests j ≡ i (mod parts) of the one schedule; an invalid step names the
// agent at fault and why.
nlohmann::json agents_json(const AgentsOutcome& agents) {
  nlohmann::json each = nlohmann::json::array();
  for (const AgentShare& a : agents.agents) {
    each.push_back({{"index", a.index},
                    {"epoch", a.epoch},
                    {"offset_ms", a.offset_ms},
                    {"offset_error_ms", a.offset_error_ms},
                    {"records", a.records},
                    {"sent", a.sent},
                    {"lag_p99_ms", a.lag_p99_ms},
                    {"late_go_ms", a.late_go_ms},
                    {"cpu_s", a.cpu_s},
                    {"loop_delay_p99_ms", a.loop_delay_p99_ms},
                    {"peak_connections", a.peak_connections},
                    {"done", a.done}});
  }
  const nlohmann::json agent = agents.invalid_agent ? nlohmann::json(*agents.invalid_agent) : nlohmann::json(nullptr);
  return {
      {"parts", agents.parts},
      {"valid", agents.valid()},
      {"invalid", agents.valid() ? nlohmann::json(nullptr) : nlohmann::json{{"agent", agent}, {"why", agents.invalid}}},
      {"per_agent", std::move(each)}};
}

// What the step did about the target's prefix cache, and the target's own count over the step
// (vLLM's prefix_cache_hits / _queries) from `server`, its scraped summary; a server with only
// the life-long gauge has no step's rate, and says so.
nlohmann::json prefix_cache_json(const PrefixCacheState& prefix_cache, const nlohmann::json& server) {
  nlohmann::json pc = {{"state", llm::to_string(prefix_cache.state)}};
  if (prefix_cache.state == llm::PrefixCache::warm) {
    pc["warm_requests"] = prefix_cache.warm_requests;
    pc["warm_failed"] = prefix_cache.warm_failed;
    pc["warm_s"] = prefix_cache.warm_s;
  }
  pc["hit_rate"] = server.value("prefix_cache_hit_rate", nlohmann::json());
  pc["hit_rate_source"] = server.value("prefix_cache_hit_rate_source", nlohmann::json());
  const nlohmann::json lifetime = server.value("prefix_cache_lifetime_hit_rate", nlohmann::json());
  if (pc["hit_rate"].is_null() && lifetime.is_number()) {
    pc["lifetime_hit_rate"] = lifetime;
    pc["note"] =
        "the server exposes only vllm:gpu_prefix_cache_hit_rate, a hit rate since it started: the step's own hit "
        "rate is unknown";
  }
  return pc;
}

}  // namespace

nlohmann::json StepResult::summary(const std::vector<double>& percentiles) const {
  nlohmann::json j = metrics.summary(percentiles);
  j["generator_limited"] = generator_limited;
  j["generator_cpu"] = generator_cpu;
  j["p99_loop_delay_ms"] = loop_delay_p99_ms;
  j["max_loop_delay_ms"] = loop_delay_max_ms;
  j["peak_in_flight"] = peak_in_flight;
  j["peak_connections"] = peak_connections;
  j["cancelled"] = cancelled;
  j["itl_lists_cut"] = itl_lists_cut;
  j["server"] = server.summary();
  // The engine: its parts (threads), each sending the requests j ≡ part (mod parts) of one
  // schedule whose digest every part held; a cap on requests in flight then holds per part.
  nlohmann::json engine = {{"parts", engine_parts}, {"schedule_digest", fmt::format("{:016x}", schedule_digest)}};
  if (trace_id.valid()) engine["trace_id"] = trace_id.hex();  // its requests' traceparent
  if (concurrency_cap_per_part > 0) {
    engine["concurrency_cap_per_part"] = concurrency_cap_per_part;
    engine["concurrency_cap_approximate"] = engine_parts > 1;
  }
  j["engine"] = std::move(engine);
  if (agents) j["agents"] = agents_json(*agents);
  if (prefix_cache.shared_prefixes || prefix_cache.state != llm::PrefixCache::as_found) {
    j["prefix_cache"] = prefix_cache_json(prefix_cache, j["server"]);
  }
  if (sessions) {
    // The sessions' own rate beside the requests' (their turns): offered_rate_rps is then the
    // turns scheduled per second (core/metrics.cpp).
    const double started = static_cast<double>(sessions->started);
    j["sessions"] = {
        {"shape", llm::to_string(sessions->shape)},
        {"history", llm::to_string(sessions->history)},
        {"offered_rate_sps", std::isfinite(metrics.offered_session_rate) ? nlohmann::json(metrics.offered_session_rate)
                                                                         : nlohmann::json(nullptr)},
        {"started", sessions->started},
        {"completed", sessions->completed},
        {"cut", sessions->cut},
        {"broken", sessions->broken},
        {"turns_sent", sessions->turns_sent},
        {"mean_turns_sent", started > 0 ? static_cast<double>(sessions->turns_sent) / started : 0.0}};
  }
  if (look_confidence > 0) {
    j["stop"] = {{"mode", "decided"},
                 {"by", to_string(stopped_by)},
                 {"looks", looks},
                 {"look_confidence", look_confidence},
                 {"at_s", decision ? nlohmann::json(to_s(decision->at)) : nlohmann::json(nullptr)},
                 {"decided", decision ? nlohmann::json(to_string(decision->verdict)) : nlohmann::json(nullptr)},
                 {"why", decision ? nlohmann::json(decision->why) : nlohmann::json(nullptr)}};
  }
  j["backlog"] = {{"mean_in_flight", backlog.mean_in_flight},
                  {"slope_per_s", backlog.slope_per_s},
                  {"growth", backlog.growth},
                  {"growth_stderr", backlog.growth_stderr},
                  {"residual_autocorrelation", backlog.residual_autocorrelation},
                  {"growing", backlog.growing}};
  return j;
}

BacklogTrend client_backlog(const std::vector<RequestRow>& requests, const StepMetrics& metrics) {
  std::vector<std::pair<Nanos, std::optional<Nanos>>> stays;
  stays.reserve(requests.size());
  for (const auto& row : requests) {
    const auto at = [](double ms) { return Nanos(static_cast<Nanos::rep>(ms * 1e6)); };
    stays.emplace_back(at(row.sent_ms),
                       std::isnan(row.finished_ms) ? std::nullopt : std::optional<Nanos>(at(row.finished_ms)));
  }
  return backlog_trend(stays, metrics.window_start, metrics.window_end);
}

}  // namespace capsweep::loadgen

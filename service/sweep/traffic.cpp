// The traffic table: the rows from the start and the one check between them.
#include "sweep/traffic.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "core/row_table.hpp"
#include "core/schedule.hpp"

namespace capsweep::sweep {

namespace {

// History "server_state" needs every target's API to keep conversations (its row's keep_state).
std::optional<Error> sessions_fit(const JobSpec& js) {
  if (js.workload.sessions->history != llm::History::server_state) return std::nullopt;
  for (const Role role : {Role::baseline, Role::candidate}) {
    if (role == Role::candidate && !js.candidate) continue;
    const llm::ApiRow& row = llm::api_row(role == Role::baseline ? js.target.api : js.candidate->target.api);
    if (row.keep_state) continue;
    return invalid("/workload/sessions/history",
                   fmt::format("server_state needs a target API that keeps the conversation on the server "
                               "(\"api\": \"responses\"); {}/api is {}",
                               target_field(js, role), row.name));
  }
  return std::nullopt;
}

TrafficRow sessions_row() {
  return {.name = "sessions",
          .field = "/workload/sessions",
          .on = [](const JobSpec& js) { return js.workload.sessions.has_value(); },
          .chained = true,
          .fits = sessions_fit};
}

TrafficRow trace_row() {
  return {.name = "trace replay",
          .field = "/arrival/process",
          .on = [](const JobSpec& js) { return arrival_row(js.arrival.process).shape == ArrivalRow::Shape::replay; },
          .needs_independent = true,
          .refuse_at_chained = true,
          .why = "a trace replays single requests at its own times"};
}

TrafficRow abandon_row() {
  return {.name = "abandonment",
          .field = "/workload/abandon",
          .on = [](const JobSpec& js) { return js.workload.abandon.has_value(); },
          .needs_independent = true,
          .why = "abandonment gives up single requests"};
}

TrafficRow decided_row() {
  return {.name = "decided stop",
          .field = "/step/stop",
          .on = [](const JobSpec& js) { return js.step.stop == StepStop::decided; },
          .needs_independent = true,
          .why =
              "a step stopped once decided looks before later turns are due: it runs its fixed length (\"stop\": "
              "\"fixed\")"};
}

// Whether a side's API answers with no generated tokens (embeddings, rerank).
bool tokenless(const llm::Target& t) {
  return !llm::api_row(t.api).generates;
}

// What needs generated tokens refused where answers have none: an SLO or goodput bound on a
// latency of tokens, abandonment, a scenario's TTFT windows, a regression's gates.
std::optional<Error> tokenless_fit(const JobSpec& js) {
  const std::string& name = llm::api_row(js.target.api).name;
  const auto why = [&name](const std::string& what) {
    return fmt::format("{} answers generate no tokens: {}; bound e2el_ms", name, what);
  };
  for (const LatencyBound& b : js.slo.latency) {
    if (b.metric != LatencyMetric::e2el && b.metric != LatencyMetric::e2el_sent)
      return invalid("/slo/" + std::string(to_string(b.metric)),
                     why("they have no " + std::string(to_string(b.metric))));
  }
  const GoodputBounds& g = js.slo.goodput;
  for (const auto& [bound, key] :
       {std::pair{&g.ttft, "ttft_ms"}, std::pair{&g.tpot, "tpot_ms"}, std::pair{&g.ttft_sent, "ttft_sent_ms"}}) {
    if (*bound) return invalid(std::string("/slo/goodput/") + key, why(std::string("they have no ") + key));
  }
  if (js.workload.abandon) return invalid("/workload/abandon", why("a user waits for the whole answer"));
  if (js.kind == JobKind::scenario) return invalid(target_field(js) + "/api", why("a scenario judges windows of TTFT"));
  if (js.kind == JobKind::regression) {
    const bool baseline = tokenless(js.target);
    return invalid(target_field(js, baseline ? Role::baseline : Role::candidate) + "/api",
                   why("a regression's gates judge TTFT, ITL and output throughput"));
  }
  return std::nullopt;
}

TrafficRow tokenless_row() {
  return {
      .name = "answers of no tokens",
      .field = "/target/api",
      .on = [](const JobSpec& js) { return tokenless(js.target) || (js.candidate && tokenless(js.candidate->target)); },
      .fits = tokenless_fit};
}

RowTable<TrafficRow>& traffic_table() {
  static RowTable<TrafficRow> t("traffic",
                                {sessions_row(), trace_row(), abandon_row(), decided_row(), tokenless_row()});
  return t;
}

}  // namespace

void register_traffic(TrafficRow row) {
  if (row.name.empty() || row.field.empty() || row.field.front() != '/' || !row.on) {
    throw std::invalid_argument("a traffic row needs a name, a field from '/' and a test of whether it is on");
  }
  traffic_table().add(std::move(row));
}

std::vector<std::string> traffic_names() {
  return traffic_table().names();
}

std::optional<Error> check_traffic(const JobSpec& spec) {
  const RowTable<TrafficRow>& table = traffic_table();
  std::vector<const TrafficRow*> on;
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table.at(i).on(spec)) on.push_back(&table.at(i));
  }
  for (const TrafficRow* row : on) {
    if (row->fits) {
      if (auto e = row->fits(spec)) return e;
    }
  }
  for (const TrafficRow* chain : on) {
    if (!chain->chained) continue;
    for (const TrafficRow* needs : on) {
      if (!needs->needs_independent) continue;
      return invalid(
          needs->refuse_at_chained ? chain->field : needs->field,
          fmt::format("{}: not with {} (their requests wait for the answers before them)", needs->why, chain->name));
    }
  }
  if (spec.agents == 0) return std::nullopt;
  for (const TrafficRow* row : on) {
    if (!row->agent_safe)
      return invalid(row->field, fmt::format("{} runs on capsweepd's own engine, not on load agents", row->name));
  }
  return std::nullopt;
}

}  // namespace capsweep::sweep

#include "sweep/step_judge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "core/capacity.hpp"
#include "core/timeline.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

double number(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

// The failures that witness unavailability rather than load (the target refused or reset
// connections, answered 5xx, cut streams), when they exceed the error bound: their classes
// and when in the step they happened. nullopt when the step's failures stay within it.
// The failures that witness unavailability in `m`, in all and by class.
std::uint64_t unavailable_count(const StepMetrics& m, json* classes = nullptr) {
  std::uint64_t n = 0;
  for (Outcome c : {Outcome::connect, Outcome::tls, Outcome::http_5xx, Outcome::stream_error}) {
    const auto k = m.outcomes[static_cast<std::size_t>(c)];
    if (k && classes) (*classes)[std::string(to_string(c))] = k;
    n += k;
  }
  return n;
}

bool beyond(std::uint64_t failed, std::uint64_t measured, double bound) {
  return measured > 0 && static_cast<double>(failed) / static_cast<double>(measured) > bound;
}

// Of a target of several replicas, the ones whose own requests failed so beyond the bound.
json failed_replicas(const StepMetrics& m, double bound) {
  json out = json::array();
  for (std::size_t k = 0; k < m.by_replica.parts.size() && k < m.by_replica.names.size(); ++k) {
    const StepMetrics& one = m.by_replica.parts[k];
    if (beyond(unavailable_count(one), one.measured, bound)) out.push_back(m.by_replica.names[k]);
  }
  return out;
}

std::optional<json> outage_of(const JobSpec& spec, const loadgen::StepResult& result) {
  const StepMetrics& m = result.metrics;
  json classes = json::object();
  const std::uint64_t n = unavailable_count(m, &classes);
  const double bound = spec.slo.max_error_rate.value_or(0.001);
  if (!beyond(n, m.measured, bound)) return std::nullopt;
  double first = std::numeric_limits<double>::infinity(), last = 0;
  for (const auto& r : result.requests) {
    if (r.outcome == Outcome::connect || r.outcome == Outcome::tls || r.outcome == Outcome::http_5xx ||
        r.outcome == Outcome::stream_error) {
      first = std::min(first, r.scheduled_ms / 1000);
      last = std::max(last, r.scheduled_ms / 1000);
    }
  }
  json out{{"errors", classes},
           {"failed", n},
           {"measured", m.measured},
           {"first_error_s", std::isfinite(first) ? json(first) : json(nullptr)},
           {"last_error_s", std::isfinite(first) ? json(last) : json(nullptr)}};
  if (!m.by_replica.empty()) out["replicas"] = failed_replicas(m, bound);
  return out;
}

// The rate the orchestrator steers by: the baseline's sequential rate, the probe's steady
// throughput, or a fixed-rate step's completions per second. Recorded in the summary.
void measure_rate(const StepOrder& order, const loadgen::StepResult& result, StepOutcome& o, json& summary) {
  std::vector<ProbeRequest> ok;
  double first_sent = std::numeric_limits<double>::infinity(), last_finish = 0;
  for (const auto& r : result.requests) {
    if (r.outcome != Outcome::ok) continue;
    ok.push_back({r.sent_ms / 1000, (r.scheduled_ms + r.ttft_ms) / 1000, r.finished_ms / 1000, r.output_tokens});
    first_sent = std::min(first_sent, r.sent_ms);
    last_finish = std::max(last_finish, r.finished_ms);
  }
  if (order.kind == StepKind::baseline) {
    o.measured_rate_rps =
        ok.empty() || last_finish <= first_sent ? 0 : double(ok.size()) / ((last_finish - first_sent) / 1000);
    summary["rate_rps"] = o.measured_rate_rps;
  } else if (order.kind == StepKind::probe) {
    if (auto st = steady_throughput(ok)) {
      o.measured_rate_rps = st->rate_rps;
      summary["probe"] = {{"rate_rps", st->rate_rps},
                          {"method", st->method},
                          {"window_start_s", st->window_start_s},
                          {"window_end_s", st->window_end_s}};
    }
    summary["rate_rps"] = o.measured_rate_rps;
  } else {
    o.measured_rate_rps = result.metrics.request_throughput();
  }
  // Sessions: the arrival process starts sessions, so the orchestrator steers by sessions per
  // second: the requests' rate over the turns each session sent.
  if (result.sessions && result.sessions->turns_sent > 0) {
    o.measured_rate_rps *=
        static_cast<double>(result.sessions->started) / static_cast<double>(result.sessions->turns_sent);
    if (summary.contains("rate_rps")) summary["rate_rps"] = o.measured_rate_rps;
  }
}

// The capacity witnesses of a fixed-rate step (completions short of arrivals, a growing
// backlog on the client or in the server's queue), recorded in the evaluation.
Saturation saturation_of(const loadgen::StepResult& result, json& evaluation) {
  const StepMetrics& m = result.metrics;
  SaturationInput in;
  in.scheduled_in_window = m.scheduled_in_window;
  in.completions_in_window = m.completions_in_window;
  in.mean_in_flight = result.backlog.mean_in_flight;
  in.backlog_growing = result.backlog.growing;
  in.backlog_growth = result.backlog.growth;
  if (auto slope = result.server.waiting_slope_per_s()) {
    in.server_waiting_growth = *slope * m.duration_s();
    const json gauges = result.server.summary();
    if (gauges.contains("mean_waiting") && gauges["mean_waiting"].is_number()) {
      in.server_mean_waiting = gauges["mean_waiting"].get<double>();
    }
  }
  const Saturation sat = judge_saturation(in);
  evaluation["saturation"] = {{"saturated", sat.saturated},
                              {"completion_ratio", sat.completion_ratio},
                              {"shortfall", sat.shortfall},
                              {"shortfall_limit", sat.shortfall_limit},
                              {"completion_short", sat.completion_short},
                              {"backlog_growing", sat.backlog_growing},
                              {"server_queue_growing", sat.server_queue_growing},
                              {"reasons", sat.reasons}};
  return sat;
}

// Each model's (replica's) own SLO verdict, in the summary's list `key`: does this adapter
// meet the SLO while the others carry their share of the load, does this replica.
void put_split_verdicts(const JobSpec& spec, const StepMetrics::Split& split, const char* key, bool generator_limited,
                        json& summary) {
  if (!summary.contains(key)) return;
  json& list = summary[key];
  for (std::size_t k = 0; k < split.parts.size() && k < list.size(); ++k) {
    const SloEvaluation ev = evaluate_slo(spec.slo, split.parts[k], generator_limited);
    const auto* lim = ev.limiting();
    list[k]["slo_verdict"] = to_string(ev.verdict);
    list[k]["limiting_metric"] = lim ? json(lim->name) : json(nullptr);
  }
}

// The verdict: the SLO, then (fixed-rate steps) saturation, then two rules no bound can
// override: a step without one success never passes, and an outage is a failure whose limit
// is the error rate, never saturation.
Verdict judge_verdict(const JobSpec& spec, const loadgen::StepResult& result, bool fixed_rate, bool generator_limited,
                      StepOutcome& o, json& summary, json& evaluation) {
  const StepMetrics& m = result.metrics;
  const SloEvaluation ev = evaluate_slo(spec.slo, m, generator_limited);
  evaluation = ev.to_json();
  put_split_verdicts(spec, m.by_model, "models", generator_limited, summary);
  put_split_verdicts(spec, m.by_replica, "replicas", generator_limited, summary);
  Verdict verdict = ev.verdict;
  const auto* lim = ev.limiting();
  o.limiting_metric = lim ? lim->name : "";
  o.limiting_value = lim ? lim->measured : 0;
  if (fixed_rate) {
    const Saturation sat = saturation_of(result, evaluation);
    o.saturated = sat.saturated;
    o.completion_ratio = sat.completion_ratio;
    if (sat.saturated && verdict != Verdict::fail) {
      verdict = Verdict::fail;
      o.limiting_metric = "saturation";
      o.limiting_value = sat.completion_ratio;
    }
  }
  if (m.completed == 0 && verdict != Verdict::fail) {
    verdict = Verdict::fail;
    o.limiting_metric = "error_rate";
    o.limiting_value = 1;
  }
  // Connection failures, 5xx answers and cut streams beyond the error bound say the target
  // was unavailable, not that the rate was beyond its capacity: such a step never counts as
  // saturated, its limit is the error rate, and the orchestrator re-runs it once.
  if (const auto outage = outage_of(spec, result)) {
    o.unavailable = true;
    o.saturated = false;
    verdict = Verdict::fail;
    o.limiting_metric = "error_rate";
    o.limiting_value = m.error_rate();
    summary["outage"] = *outage;
    evaluation["outage"] = *outage;
  }
  // A step on load agents that lost one (or its clock, its go, its schedule) sent less than
  // its schedule: stored and shown, never passed, and never taken for the target's failure.
  if (result.agents && !result.agents->valid()) {
    verdict = Verdict::inconclusive;
    o.saturated = false;
    o.limiting_metric = "agents";
    o.limiting_value = result.agents->invalid_agent.value_or(0);
    evaluation["invalid"] = summary["agents"]["invalid"];
  }
  return verdict;
}

// The step's requests as stored rows (NaN becomes absent).
std::vector<store::RequestRow> stored_requests(const loadgen::StepResult& result) {
  std::vector<store::RequestRow> out;
  out.reserve(result.requests.size());
  for (const auto& r : result.requests) {
    store::RequestRow q;
    q.index = r.index;
    q.scheduled_ms = r.scheduled_ms;
    q.dispatched_ms = finite(r.dispatched_ms);
    q.sent_ms = finite(r.sent_ms);
    q.finished_ms = finite(r.finished_ms);
    q.ttft_ms = finite(r.ttft_ms);
    q.e2el_ms = finite(r.e2el_ms);
    q.input_tokens = r.input_tokens;
    q.output_tokens = r.output_tokens;
    q.chunks = r.chunks;
    q.turn = r.turn;
    q.outcome = std::string(to_string(r.outcome));
    // "12.345 11.9 ..." (ms, to the microsecond): formatted here, after the step, never on
    // the load engine's thread.
    for (float gap : r.itl_ms)
      fmt::format_to(std::back_inserter(q.itl_ms), "{}{:.3f}", q.itl_ms.empty() ? "" : " ", gap);
    out.push_back(std::move(q));
  }
  return out;
}

// A check's or a closed-loop level's requests over time (what its report draws).
json step_timeline(const loadgen::StepResult& result) {
  std::vector<TimelineRequest> rows;
  rows.reserve(result.requests.size());
  double end_s = 0;
  for (const auto& r : result.requests) {
    TimelineRequest t;
    t.scheduled_s = r.scheduled_ms / 1000;
    t.sent_s = r.sent_ms / 1000;
    t.finished_s = r.finished_ms / 1000;
    t.ttft_ms = r.ttft_ms;
    t.ok = r.outcome == Outcome::ok;
    for (double v : {t.scheduled_s, t.finished_s})
      if (std::isfinite(v)) end_s = std::max(end_s, v);
    rows.push_back(t);
  }
  if (!(end_s > 0)) return nullptr;
  const double width = timeline_width(end_s);
  return timeline_json(timeline(rows, width, end_s + 1e-9), width);
}

// The stored summary of a step: the runner's figures at the job's percentiles, and what the
// step was (kind, phase, a regression's role and round, a closed loop's users; a check's,
// a run's and a closed loop's timeline).
json step_summary(const JobSpec& spec, const StepOrder& order, const loadgen::StepResult& result,
                  bool generator_limited) {
  json summary = result.summary(summary_percentiles(spec));
  summary["percentiles"] = spec.report_percentiles;
  summary["generator_limited"] = generator_limited;
  summary["step_kind"] = to_string(order.kind);
  summary["phase"] = order.phase;
  if (order.role) {
    summary["role"] = to_string(*order.role);
    summary["round"] = order.round;
  }
  if (order.kind == StepKind::check || order.kind == StepKind::run || order.closed_loop) {
    summary["timeline"] = step_timeline(result);
  }
  if (order.closed_loop) summary["users"] = order.concurrency;
  return summary;
}

// The repository row of a judged step.
store::StepRow step_row(const StepOrder& order, const StepOutcome& o, bool fixed_rate, json summary, json evaluation,
                        json server) {
  store::StepRow row;
  row.kind = std::string(to_string(order.kind));
  row.phase = order.phase;
  if (fixed_rate || (order.kind == StepKind::check && std::isfinite(order.rate_rps)))
    row.offered_rate_rps = order.rate_rps;
  row.verdict = std::string(to_string(o.verdict));
  row.generator_limited = o.generator_limited;
  row.summary = std::move(summary);
  row.evaluation = std::move(evaluation);
  row.outcome = o.to_json();
  if (order.role) {
    row.role = std::string(to_string(*order.role));
    row.round = order.round;
  }
  row.server = std::move(server);
  return row;
}

}  // namespace

JudgedStep judge_step(const JobSpec& spec, const StepOrder& order, const loadgen::StepResult& result) {
  JudgedStep out;
  StepOutcome& o = out.outcome;
  const StepMetrics& m = result.metrics;
  o.kind = order.kind;
  o.rerun = order.rerun;
  o.scout = order.scout;
  o.role = order.role;
  o.round = order.round;
  o.offered_rate_rps = (order.kind == StepKind::baseline || order.kind == StepKind::probe) ? 0 : order.rate_rps;
  // The engine's verdict (loadgen::generator_limited: a burst's lag does not count).
  const bool generator_limited = result.generator_limited;
  o.generator_limited = generator_limited;
  o.completed = m.completed;
  o.measured = m.measured;

  json summary = step_summary(spec, order, result, generator_limited);
  if (order.closed_loop) o.users = order.concurrency;
  measure_rate(order, result, o, summary);

  const bool fixed_rate = std::isfinite(order.rate_rps) && order.rate_rps > 0 && order.kind != StepKind::baseline &&
                          order.kind != StepKind::probe;
  json evaluation;
  const Verdict verdict = judge_verdict(spec, result, fixed_rate, generator_limited, o, summary, evaluation);
  o.verdict = verdict;
  evaluation["verdict"] = to_string(verdict);
  evaluation["limiting_metric"] = o.limiting_metric.empty() ? json(nullptr) : json(o.limiting_metric);
  if (summary.contains("stop")) evaluation["stopped_by"] = summary["stop"]["by"];  // a decided step: what ended it
  summary["slo_pass"] = verdict == Verdict::pass;
  summary["verdict"] = to_string(verdict);
  o.p95_ttft_ms = number(summary, "p95_ttft_ms");
  o.mean_e2el_ms = number(summary, "mean_e2el_ms");

  json server = result.server.scrapes() || result.server.failures() ? result.server.summary() : json(nullptr);
  if (server.is_object()) {
    const json& run = server["mean_running"];
    const json& wait = server["mean_waiting"];
    if (run.is_number() && wait.is_number()) o.server_in_system = run.get<double>() + wait.get<double>();
  }
  o.summary = summary;
  o.evaluation = evaluation;

  out.row = step_row(order, o, fixed_rate, std::move(summary), std::move(evaluation), std::move(server));
  out.requests = stored_requests(result);
  return out;
}

}  // namespace capsweep::sweep

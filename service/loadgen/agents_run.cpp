// capsweepd's side of a step run by load agents (StepRunner::run_on_agents): the step is
// planned here as a local one would be, its digest offered through the hub, and the agents'
// raw records folded into one accumulator, so the verdict comes from the same stats code.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "llm/session_shapes.hpp"
#include "loadgen/agent_hub.hpp"
#include "loadgen/engine_part.hpp"
#include "loadgen/step_runner.hpp"

namespace capsweep::loadgen {

namespace {

// Requests in flight on the client at their highest, from the records' dispatch and end.
std::uint64_t peak_in_flight_of(const std::vector<IndexedRecord>& records) {
  std::vector<std::pair<Nanos, int>> events;
  events.reserve(records.size() * 2);
  for (const auto& r : records) {
    events.emplace_back(r.rec.dispatched, 1);
    events.emplace_back(r.rec.outcome == Outcome::incomplete ? Nanos::max() : r.rec.finished, -1);
  }
  std::sort(events.begin(), events.end());  // at a tie the end (-1) comes first
  std::int64_t now = 0, peak = 0;
  for (const auto& [t, d] : events) peak = std::max(peak, now += d);
  return static_cast<std::uint64_t>(peak);
}

// The agents' records folded as one step's, by the code a local step's use: in completion order
// over every agent (requests that never finished last, by index) into one accumulator, and
// the step's rows.
void fold_records(std::vector<IndexedRecord>& records, const StepSpec& spec, const StepWindow& window,
                  StepResult& result) {
  completion_order(records, [](const IndexedRecord& r) {
    return r.rec.outcome == Outcome::incomplete ? Nanos::max() : r.rec.finished;
  });
  StepAccumulator acc(window, spec.goodput, spec.exact_samples);
  RowKeeper keeper;
  for (const IndexedRecord& r : records) {
    acc.add(r.rec);
    if (spec.keep_rows) keeper.keep(r.rec, r.index, RowKeeper::kMaxItlSamples, result.requests);
  }
  result.itl_lists_cut = keeper.cut;
  result.metrics = std::move(acc).finish();
}

}  // namespace

std::shared_ptr<const StepExpectation> StepRunner::expectation(const StepSpec& spec, const StepPlan& plan) const {
  auto e = std::make_shared<StepExpectation>();
  e->closed_loop = spec.mode == Mode::concurrency;
  if (!e->closed_loop) e->send_times = plan.schedule.send_times;
  if (const auto& sessions = workload_->spec().sessions) {
    // A dataset's conversations bring their own turns, up to the most a session may have.
    e->max_turns = workload_->spec().dataset ? llm::kMaxSessionTurns : llm::most_session_turns(*sessions);
  }
  if (spec.agents) e->tolerance = spec.agents->hub->settings().max_offset_error;
  return e;
}

Result<StepResult> StepRunner::run_on_agents(const StepSpec& spec) {
  const AgentsPlan& a = *spec.agents;
  if (a.hub == nullptr || a.parts == 0) return invalid("/agents", "a step on agents needs the service's agent hub");
  auto plan = plan_step(spec, workload_->spec().sessions.has_value());
  if (!plan) return plan.error();
  const std::uint64_t digest = split_schedule(plan->schedule, 0, a.parts, schedule_salt(spec)).digest;
  const PrefixCacheState prefix_cache = prepare_prefix_cache(spec);
  progress_.reset();

  std::optional<observe::Scraper> scraper;
  SteadyClock::time_point went{};
  AgentsStep got = a.hub->run_step(
      a.run, a.payload, digest, expectation(spec, *plan), plan->drain_deadline,
      [this] { return cancel_requested_.load(); },
      [&](SteadyClock::time_point t0) {
        went = t0;
        start_scraper(scraper, spec, target_, t0);
      });
  const double wall = got.t0 ? std::max(0.0, to_s(SteadyClock::now() - went)) : 0;
  cancel_requested_ = false;

  StepResult result;
  result.cancelled = got.cancelled;
  result.prefix_cache = prefix_cache;
  result.engine_parts = a.parts;
  result.schedule_digest = digest;
  result.concurrency_cap_per_part = spec.concurrency == 0 ? 0 : (spec.concurrency + a.parts - 1) / a.parts;
  fold_records(got.records, spec, plan->window, result);
  result.peak_in_flight = peak_in_flight_of(got.records);
  double busiest = 0, lag_worst = 0;
  SessionCounts sessions;
  for (const AgentShare& s : got.outcome.agents) {
    sessions.add(s.sessions);
    result.generator_cpu_s += s.cpu_s;
    busiest = std::max(busiest, s.cpu_s);
    result.loop_delay_p99_ms = std::max(result.loop_delay_p99_ms, s.loop_delay_p99_ms);
    result.loop_delay_max_ms = std::max(result.loop_delay_max_ms, s.loop_delay_max_ms);
    result.peak_connections += s.peak_connections;
    lag_worst = std::max(lag_worst, s.lag_p99_ms);
  }
  result.generator_cpu = wall > 0 ? busiest / wall : 0;
  if (workload_->spec().sessions && sessions.started > 0) {
    sessions.history = workload_->spec().sessions->history;
    sessions.shape = workload_->spec().sessions->shape;
    result.sessions = sessions;
  }
  progress_.done = result.metrics.completed;
  if (scraper) result.server = scraper->stop();
  result.backlog = client_backlog(result.requests, result.metrics);
  const double lag_p99_ms = result.metrics.schedule_lag_ms.percentile(99);
  result.generator_limited = generator_limited(spec, std::max(lag_p99_ms, lag_worst), result.generator_cpu);
  result.agents = std::move(got.outcome);
  return result;
}

}  // namespace capsweep::loadgen

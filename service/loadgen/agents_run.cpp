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

// The agents' records as one part of the step (in completion order over every agent; requests
// that never finished last, by index): one accumulator and the step's rows, for fold_step.
PartResult records_part(std::vector<IndexedRecord>& records, const StepSpec& spec, const StepWindow& window,
                        const llm::Target& target) {
  completion_order(records, [](const IndexedRecord& r) {
    return r.rec.outcome == Outcome::incomplete ? Nanos::max() : r.rec.finished;
  });
  PartResult part;
  part.acc.emplace(window, spec.goodput, spec.exact_samples);
  part.acc->split_by_model(model_names(target));
  part.acc->split_by_replica(target.replica_urls());
  RowKeeper keeper;
  for (const IndexedRecord& r : records) {
    part.acc->add(r.rec);
    if (spec.keep_rows) keeper.keep(r.rec, r.index, RowKeeper::kMaxItlSamples, part.rows);
  }
  part.itl_lists_cut = keeper.cut;
  return part;
}

// What each agent said of itself in its done-summary, as a generator's share.
std::vector<GeneratorShare> agent_shares(const std::vector<AgentShare>& agents) {
  std::vector<GeneratorShare> out;
  for (const AgentShare& a : agents) {
    out.push_back({.cpu_s = a.cpu_s,
                   .loop_delay_p99_ms = a.loop_delay_p99_ms,
                   .loop_delay_max_ms = a.loop_delay_max_ms,
                   .lag_p99_ms = a.lag_p99_ms,
                   .peak_connections = a.peak_connections,
                   .sessions = a.sessions});
  }
  return out;
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
  e->models = static_cast<std::uint32_t>(std::max<std::size_t>(target_.models.size(), 1));
  e->replicas = static_cast<std::uint32_t>(target_.replica_count());
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
  result.prefix_cache = prefix_cache;
  result.engine_parts = a.parts;
  result.schedule_digest = digest;
  result.concurrency_cap_per_part = cap_per_part(spec, a.parts);
  result.peak_in_flight = peak_in_flight_of(got.records);
  std::vector<PartResult> parts;
  parts.push_back(records_part(got.records, spec, plan->window, target_));
  parts.front().cancelled = got.cancelled;
  fold_step(parts, agent_shares(got.outcome.agents), wall, spec, workload_->spec().sessions, result);
  progress_.done = result.metrics.completed;
  if (scraper) result.server = scraper->stop();
  result.agents = std::move(got.outcome);
  return result;
}

}  // namespace capsweep::loadgen

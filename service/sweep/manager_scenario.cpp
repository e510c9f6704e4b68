// A scenario job's step: the whole profile sent as one step, watched window by window
// (ScenarioWatch), then judged from its stored windows and events.

#include <fmt/format.h>

#include "core/memory.hpp"
#include "store/store.hpp"
#include "sweep/manager_parts.hpp"
#include "sweep/scenario.hpp"
#include "sweep/scenario_watch.hpp"

namespace capsweep::sweep {

using json = nlohmann::json;

namespace {

// The step as stored: the load engine's summary with the scenario's result in it.
store::StepRow scenario_row(const JobSpec& spec, const StepOrder& order, int index, const loadgen::StepResult& r,
                            const json& result, std::size_t windows) {
  StepOutcome o;
  o.kind = StepKind::scenario;
  const std::string v = result.value("verdict", "inconclusive");
  o.verdict = v == "pass" ? Verdict::pass : v == "fail" ? Verdict::fail : Verdict::inconclusive;
  o.offered_rate_rps = order.rate_rps;
  o.completed = r.metrics.completed;
  o.measured = r.metrics.measured;
  o.generator_limited = r.generator_limited;
  store::StepRow row;
  row.index = index;
  row.kind = "scenario";
  row.phase = order.phase;
  row.offered_rate_rps = order.rate_rps;
  row.verdict = v;
  row.generator_limited = r.generator_limited;
  row.summary = r.summary(summary_percentiles(spec));
  row.summary["step_kind"] = "scenario";
  row.summary["windows"] = windows;
  row.summary["result"] = result;
  row.evaluation = {{"verdict", v}, {"checks", result.value("checks", json::object())}};
  row.outcome = o.to_json();
  row.server = r.server.scrapes() || r.server.failures() ? r.server.summary() : json(nullptr);
  return row;
}

// The load engine's step for a scenario: the profile's schedule sent as it is, no per-request
// rows (the windows are the record), few exact samples, each request handed to the watch.
loadgen::StepSpec scenario_step_spec(loadgen::StepSpec ss, const JobSpec& spec, Schedule schedule,
                                     const Profile& profile, ScenarioWatch& watch, const ManagerOptions& options) {
  ss.schedule = std::make_shared<const Schedule>(std::move(schedule));
  ss.duration = profile.duration();
  ss.warmup = Nanos{0};
  ss.requests.reset();
  ss.keep_rows = false;     // the windows are the record; memory stays flat however long it runs
  ss.exact_samples = 4096;  // the step's summary: exact up to 4,096 samples a latency, then 2% buckets
  ss.track_live = true;
  ss.drain_timeout = spec.scenario->drain_timeout;
  ss.on_scheduled = [&watch](Nanos t) { watch.scheduled(t); };
  ss.on_ended = [&watch](const RequestRecord& r) { watch.ended(r); };
  if (options.max_connections > 0 && (ss.concurrency == 0 || ss.concurrency > options.max_connections)) {
    ss.concurrency = options.max_connections;
  }
  return ss;
}

// What the scenario's watch is told: the service's caps, how to list the requests in flight,
// where each stored window goes, and what to do when the replica source fails for good.
// (A template: the manager's job records are its own types.)
template <class PreparedJob, class ActiveJob>
ScenarioWatch::Options watch_options(const ManagerOptions& options, PreparedJob& p,
                                     const std::shared_ptr<ActiveJob>& active,
                                     std::function<void(const std::string&)> on_fatal) {
  ScenarioWatch::Options wo;
  wo.allow_address = options.allow_host;
  wo.max_response_bytes = options.max_response_bytes;
  wo.live = [&p] {
    std::vector<LiveRequest> out;
    for (const auto& l : p.runner->live_requests()) out.push_back({l.scheduled, l.first_token});
    return out;
  };
  wo.in_flight = [&p] { return p.runner->progress().in_flight.load(); };
  wo.on_window = [active](const json& w) {
    std::lock_guard al(active->m);
    active->latest_window = w;
  };
  wo.on_fatal = std::move(on_fatal);
  return wo;
}

// The scenario's whole schedule, drawn from its profile with the step's seed.
Result<Schedule> scenario_schedule(const JobSpec& spec, const Profile& profile, int index) {
  return profile_schedule(profile, spec.arrival.process, spec.arrival.burstiness,
                          spec.workload.seed * 1'000'003ULL + static_cast<std::uint64_t>(index));
}

// The first reason given, from any thread.
class FirstReason {
 public:
  void set(const std::string& why) {
    std::lock_guard lock(m_);
    if (why_.empty()) why_ = why;
  }
  std::string get() const {
    std::lock_guard lock(m_);
    return why_;
  }

 private:
  mutable std::mutex m_;
  std::string why_;
};

}  // namespace

bool SweepManager::run_scenario_step(const store::SweepRow& row, Prepared& p, const std::shared_ptr<Active>& active,
                                     const StepOrder& order, int index, int steps_planned) {
  const std::string& id = row.id;
  const JobSpec& spec = p.spec;
  auto profile = scenario_profile(*spec.scenario);
  auto schedule = profile ? scenario_schedule(spec, *profile, index) : Result<Schedule>(profile.error());
  if (!schedule) {
    store_->end_step_attempt(id);
    finish(id, "failed", nullptr, "the scenario's profile: " + schedule.error().message);
    return false;
  }
  store_->clear_windows(id);  // a step started again after a crash begins its windows anew
  FirstReason fatal;          // what the watch found fatal, from its thread
  ScenarioWatch::Options wo = watch_options(options_, p, active, [&](const std::string& why) {
    fatal.set(why);
    p.runner->cancel();
  });
  ScenarioWatch watch(spec, *profile, id, *store_, std::move(wo));
  if (const std::string why = watch.probe_replica_source(); !why.empty()) {
    store_->end_step_attempt(id);
    finish(id, "failed", nullptr, "scenario.replicas: " + why);
    return false;
  }
  loadgen::StepSpec ss =
      scenario_step_spec(step_spec(spec, order, index), spec, std::move(*schedule), *profile, watch, options_);
  active->enter_step(order, index, steps_planned, p.runner.get(), profile->duration());
  store_->set_progress(id,
                       {{"phase", order.phase}, {"step", index + 1}, {"steps_planned", steps_planned}, {"percent", 0}});
  if (active->cancel) p.runner->cancel();
  const std::string started_at = store::utc_now();
  bool over_time = false;
  Result<loadgen::StepResult> result = Error{errc::internal, "not run", ""};
  {
    StepDeadline deadline(*active, p.started + options_.max_total_sweep);
    watch.start(SteadyClock::now() + std::chrono::milliseconds(20));  // the runner's origin, as near as it gets
    result = p.runner->run(ss);
    over_time = deadline.end_step();
  }
  const json events = watch.stop();
  store_->end_step_attempt(id);
  {
    std::lock_guard al(active->m);
    active->latest_window = nullptr;
  }
  // No database write under a lock: the reason is copied out first.
  std::string failure = fatal.get().empty() ? std::string() : "scenario.replicas: " + fatal.get();
  if (failure.empty() && !result) failure = fmt::format("the scenario could not run: {}", result.error().message);
  if (failure.empty() && over_time)
    failure = "the job reached the service's max_total_sweep_s limit during its scenario";
  if (!failure.empty()) {
    finish(id, "failed", nullptr, failure);
    return false;
  }
  if (result->cancelled || active->cancel || stopping()) return true;  // not stored; the caller's loop says why
  const auto windows = store_->windows(id);
  const json verdict = scenario_result(spec, *profile, windows, events, watch.requests(), result->generator_limited);
  store::StepRow step = scenario_row(spec, order, index, *result, verdict, windows.size());
  step.started_at = started_at;
  store_scenario_step(id, std::move(step), result->metrics.measured, windows.size());
  return true;
}

void SweepManager::store_scenario_step(const std::string& id, store::StepRow step, std::uint64_t measured,
                                       std::size_t windows) {
  step.finished_at = store::utc_now();
  store_->append_step(id, step, {});
  stats_.steps_run++;
  stats_.requests_sent += measured;
  log_line(fmt::format("sweep {} step {} (scenario, {} windows) {}", id, step.index, windows, step.verdict));
  memory::return_free_memory();
}

}  // namespace capsweep::sweep

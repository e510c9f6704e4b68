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
                                     const Profile& profile, ScenarioWatch& watch) {
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
  return ss;
}

// What the scenario's watch is told: the service's caps, how to list the requests in flight,
// where each stored window goes, and what to do when the replica source fails for good.
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

// The scenario's whole schedule, drawn from its profile with the step's seed; a trace's rows
// (arrival.process "trace") follow the profile's rate with their own bursts and gaps.
Result<Schedule> scenario_schedule(const JobSpec& spec, const Profile& profile, int index,
                                   const llm::Workload& workload) {
  if (spec.arrival.process == ArrivalProcess::trace) return profile_replay(profile, workload.trace_offsets());
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

// A scenario's one step: the profile's whole schedule sent, watched window by window while it
// runs (the windows are stored as they close), the checks judged from the stored windows and
// the watch's events.
class ScenarioStep final : public StepExecutor {
 public:
  ScenarioStep(const store::SweepRow& row, PreparedJob& p, const std::shared_ptr<ActiveJob>& active,
               const StepOrder& order, int index, Profile profile, store::Store& store, const ManagerOptions& options)
      : p_(p),
        order_(order),
        index_(index),
        profile_(std::move(profile)),
        store_(store),
        id_(row.id),
        watch_(p.spec, profile_, row.id, store,
               watch_options(options, p, active,
                             [this](const std::string& why) {
                               fatal_.set(why);
                               p_.runner->cancel();
                             })),
        active_(active) {}

  // Why the target's replica source cannot be read ("" when it can).
  std::string probe() { return watch_.probe_replica_source(); }
  void set_spec(loadgen::StepSpec ss) { ss_ = std::move(ss); }
  ScenarioWatch& watch() { return watch_; }
  const Profile& profile() const { return profile_; }

  loadgen::RunControl* control() override { return p_.runner.get(); }
  Nanos length() const override { return profile_.duration(); }
  void run() override {
    watch_.start(SteadyClock::now() + std::chrono::milliseconds(20));  // the runner's origin, as near as it gets
    result_ = p_.runner->run(ss_);
  }
  void after() override {
    events_ = watch_.stop();
    std::lock_guard al(active_->m);
    active_->latest_window = nullptr;
  }
  std::string failure() const override {
    if (const std::string why = fatal_.get(); !why.empty()) return "scenario.replicas: " + why;
    if (!result_) return fmt::format("the scenario could not run: {}", result_.error().message);
    return {};
  }
  bool cut_short() const override { return result_->cancelled; }
  StoredStep judge() override {
    const auto windows = store_.windows(id_);
    const json verdict =
        scenario_result(p_.spec, profile_, windows, events_, watch_.requests(), result_->generator_limited);
    StoredStep s;
    s.row = scenario_row(p_.spec, order_, index_, *result_, verdict, windows.size());
    s.requests_sent = result_->metrics.measured;
    s.log = fmt::format("(scenario, {} windows) {}", windows.size(), s.row.verdict);
    return s;
  }

 private:
  PreparedJob& p_;
  const StepOrder& order_;
  int index_;
  Profile profile_;
  store::Store& store_;
  std::string id_;
  FirstReason fatal_;  // what the watch found fatal, from its thread
  ScenarioWatch watch_;
  std::shared_ptr<ActiveJob> active_;
  loadgen::StepSpec ss_;
  Result<loadgen::StepResult> result_ = Error{errc::internal, "not run", ""};
  json events_;
};

}  // namespace

std::unique_ptr<StepExecutor> SweepManager::scenario_executor(const store::SweepRow& row, PreparedJob& p,
                                                              const std::shared_ptr<ActiveJob>& active,
                                                              const StepOrder& order, int index, std::string& why) {
  const JobSpec& spec = p.spec;
  auto profile = scenario_profile(*spec.scenario);
  auto schedule =
      profile ? scenario_schedule(spec, *profile, index, p.runner->workload()) : Result<Schedule>(profile.error());
  if (!schedule) {
    why = "the scenario's profile: " + schedule.error().message;
    return nullptr;
  }
  store_->clear_windows(row.id);  // a step started again after a crash begins its windows anew
  auto step = std::make_unique<ScenarioStep>(row, p, active, order, index, std::move(*profile), *store_, options_);
  if (const std::string probed = step->probe(); !probed.empty()) {
    why = "scenario.replicas: " + probed;
    return nullptr;
  }
  auto base = loadgen::plan_load_step(load_settings(spec, order, index, row.id, options_.max_connections), {});
  if (!base) {
    why = base.error().message;
    return nullptr;
  }
  step->set_spec(scenario_step_spec(std::move(*base), spec, std::move(*schedule), step->profile(), step->watch()));
  return step;
}

}  // namespace capsweep::sweep

// The job loop of a claimed job: prepare it (spec, dataset, calibration, runners), then ask
// its planner for the next step, run it, judge and store it, until the planner finishes.
// The queue, the workers and the job's lifecycle are in manager.cpp.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/json_access.hpp"
#include "core/log.hpp"
#include "core/memory.hpp"
#include "loadgen/agent_hub.hpp"
#include "loadgen/step_runner.hpp"
#include "sweep/agents.hpp"
#include "sweep/kinds.hpp"
#include "sweep/manager.hpp"
#include "sweep/manager_parts.hpp"
#include "sweep/quality_pass.hpp"
#include "sweep/spec.hpp"
#include "sweep/step_judge.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

// The result with the load's record as submitted (defaults filled, the dataset's sha256):
// the workload (lengths, seed, dataset), the arrival process (burstiness), what the target is
// (target.labels; a regression's baseline.labels and candidate.labels), the basis, and the
// percentiles reported. A check's conditions also name the lengths,
// the longest output a request could ask, the seed, the burstiness and the dataset, so its
// five-part record reads whole. `max_output_tokens` is null when the distribution is unbounded.
json with_record(json result, const json& stored_spec, std::optional<double> max_output_tokens) {
  const json workload = stored_spec.value("workload", json::object());
  const json arrival = stored_spec.value("arrival", json::object());
  result["workload"] = workload;
  result["arrival"] = arrival;
  const json target = stored_spec.value("target", json::object());
  result["labels"] = target.value("labels", json::object());
  // A regression's two sides: what each ran (runtime, model, quantization, ...), side by side.
  for (const char* side : {"baseline", "candidate"}) {
    if (result.contains(side) && result[side].is_object()) {
      const json& t = json_at(json_at(stored_spec, side), "target");
      result[side]["labels"] = t.is_object() ? t.value("labels", json::object()) : json::object();
    }
  }
  if (!result.contains("basis")) result["basis"] = stored_spec.value("basis", "");
  result["report"] = stored_spec.value("report", json::object());
  if (result.contains("conditions") && result["conditions"].is_object()) {
    json& c = result["conditions"];
    const json dataset = workload.value("dataset", json());
    c["prompt_tokens"] = dataset.is_object() ? json{{"from", "dataset"}} : workload.value("prompt_tokens", json());
    c["output_tokens"] = dataset.is_object()
                             ? (dataset.value("output_tokens", json()).is_object() ? dataset["output_tokens"]
                                                                                   : json{{"from", "dataset"}})
                             : workload.value("output_tokens", json());
    c["max_output_tokens"] = max_output_tokens ? json(*max_output_tokens) : json(nullptr);
    c["seed"] = workload.value("seed", json(0));
    // The gamma shape that was sent: 1 for Poisson gaps (a gamma of shape 1), none for
    // constant gaps or all at once (the parser refuses a burstiness they would not send).
    const std::string process = arrival.value("process", "poisson");
    c["burstiness"] = process == "gamma"     ? arrival.value("burstiness", json(1))
                      : process == "poisson" ? json(1)
                                             : json(nullptr);
    const json check = stored_spec.value("check", json::object());
    c["think_time_ms"] = check.value("think_time_ms", json());
    c["dataset"] = dataset.is_object() ? json{{"id", dataset.value("id", "")}, {"sha256", dataset.value("sha256", "")}}
                                       : json(nullptr);
  }
  return result;
}

}  // namespace

namespace {

loadgen::StepShape shape_of(const StepOrder& order) {
  switch (order.kind) {
    case StepKind::baseline:
      return loadgen::StepShape::one_by_one;
    case StepKind::probe:
      return loadgen::StepShape::burst;
    case StepKind::scenario:
      return loadgen::StepShape::profile;
    default:
      return order.closed_loop ? loadgen::StepShape::users : loadgen::StepShape::arrivals;
  }
}

}  // namespace

loadgen::LoadSettings load_settings(const JobSpec& spec, const StepOrder& order, int index, const std::string& job_id,
                                    std::uint32_t max_connections) {
  loadgen::LoadSettings s;
  const KindRules& kind = rules(spec.kind);
  s.shape = shape_of(order);
  s.arrival = spec.arrival;
  s.rate_rps = order.rate_rps;
  s.duration = order.duration;
  s.warmup = order.warmup;
  s.requests = order.requests;
  s.concurrency = order.concurrency;
  if (s.shape == loadgen::StepShape::users) s.think_time_ms = kind.think_time(spec);
  s.seed = spec.workload.seed;
  // A regression's two runs of a round get the identical schedule and prompts: both are drawn
  // from the round, not the step.
  s.draw = static_cast<std::uint64_t>(order.kind == StepKind::run ? order.round : index);
  s.request_timeout = spec.target.request_timeout;
  s.drain_timeout = kind.drain_timeout(spec);
  s.goodput = spec.slo.goodput;
  s.prefix_cache = spec.workload.prefix.cache;
  s.job_id = job_id;
  s.trace_id = step_trace_id(job_id, static_cast<std::uint64_t>(index));
  s.max_connections = max_connections;
  const bool candidate = order.role == Role::candidate && spec.candidate;
  s.metrics_url = candidate ? spec.candidate->metrics_url : spec.metrics_url;
  s.prometheus = candidate ? spec.candidate->prometheus : spec.prometheus;
  if (order.decided) {
    // A pass needs a fixed step's length: the saturation witnesses' resolution.
    DecideSettings d = spec.step.decide;
    d.min_pass_time = std::min(spec.sweep.step_duration, order.duration);
    d.min_time = std::min(d.min_time, order.duration);  // a scouting sweep's full steps with no "step" block
    s.decide = loadgen::DecidedStop{spec.slo, d};
  }
  return s;
}

namespace {

// A load step (baseline, probe, a rate or a level, a check's step, a regression's run): the
// load engine runs its settings, the step judge judges it.
class LoadStep final : public StepExecutor {
 public:
  LoadStep(const JobSpec& spec, const StepOrder& order, int index, loadgen::StepRunner& runner, loadgen::StepSpec ss,
           Nanos length)
      : spec_(spec), order_(order), index_(index), runner_(runner), ss_(std::move(ss)), length_(length) {}

  loadgen::RunControl* control() override { return &runner_; }
  Nanos length() const override { return length_; }
  void run() override { result_ = runner_.run(ss_); }
  std::string failure() const override {
    if (result_) return {};
    return fmt::format("step {} could not run: {} ({})", index_, result_.error().message, result_.error().field);
  }
  bool cut_short() const override { return result_->cancelled; }
  StoredStep judge() override {
    JudgedStep judged = judge_step(spec_, order_, *result_);
    if (spec_.workload.dataset) {
      judged.row.summary["dataset"] = {{"id", spec_.workload.dataset->id}, {"sha256", spec_.workload.dataset->sha256}};
    }
    StoredStep s;
    s.requests_sent = result_->requests.size();
    s.log =
        fmt::format("({} {}) {}: {}", order_.phase,
                    std::isfinite(order_.rate_rps) && order_.rate_rps > 0 ? fmt::format("{:.2f} req/s", order_.rate_rps)
                                                                          : std::string("-"),
                    judged.row.verdict, judged.outcome.limiting_metric);
    s.row = std::move(judged.row);
    s.requests = std::move(judged.requests);
    result_ = Error{errc::internal, "judged", ""};  // the raw records are not needed any more
    return s;
  }

 private:
  const JobSpec& spec_;
  const StepOrder& order_;
  int index_;
  loadgen::StepRunner& runner_;
  loadgen::StepSpec ss_;
  Nanos length_;
  Result<loadgen::StepResult> result_ = Error{errc::internal, "not run", ""};
};

}  // namespace

namespace {

// The prompts' tokens per word, calibrated against the job's target. A scenario that judges a
// cold start or readiness must send the target nothing before its load: the calibration's
// request would wake a fleet scaled to zero, or wait out a model still loading, and the job
// would judge a target that it had warmed itself.
double prompt_calibration(const JobSpec& spec, std::string& how, const std::function<bool()>& stop) {
  if (spec.scenario && (spec.scenario->checks.cold_start || spec.scenario->checks.readiness)) {
    how = "prompt lengths not calibrated: the scenario judges the target's cold start or readiness";
    return 1.0;
  }
  return loadgen::calibrate_tokens_per_word(spec.target, how, stop);
}

}  // namespace

std::optional<double> SweepManager::max_output_tokens(const JobSpec& spec) {
  if (spec.workload.dataset && spec.workload.dataset->output_from_dataset) {
    const auto row = store_->dataset(spec.workload.dataset->id);
    const json max = row ? row->stats.value("/output_tokens/max"_json_pointer, json()) : json();
    return max.is_number() ? std::optional<double>(max.get<double>()) : std::nullopt;
  }
  const std::uint32_t bound = spec.workload.output_tokens.upper_bound();
  return bound == UINT32_MAX ? std::nullopt : std::optional<double>(bound);
}

Result<std::vector<llm::DatasetEntry>> SweepManager::load_dataset(const llm::DatasetRef& ref) {
  auto meta = store_->dataset(ref.id);
  auto content = meta ? store_->dataset_content(ref.id) : std::nullopt;
  if (!content) return Error{errc::not_found, fmt::format("dataset {} is no longer stored", ref.id), ""};
  if (!ref.sha256.empty() && ref.sha256 != meta->sha256) {
    return Error{errc::conflict, fmt::format("dataset {} no longer has sha256 {}", ref.id, ref.sha256), ""};
  }
  auto parsed =
      llm::parse_dataset(llm::parse_dataset_format(meta->format).value_or(llm::DatasetFormat::jsonl), *content);
  if (!parsed) return Error{errc::parse_error, fmt::format("dataset {}: {}", ref.id, parsed.error().message), ""};
  return std::move(parsed->entries);
}

std::optional<std::string> SweepManager::admit_targets(JobSpec& spec) const {
  // The allow-list may have changed since the sweep was queued.
  if (options_.allow_host) {
    if (auto refused = refused_host(spec, options_.allow_host)) return refused->what;
  }
  // Every target the job sends to: the allow-list on each address, the service's answer caps.
  for (llm::Target* t :
       {&spec.target, spec.candidate ? &spec.candidate->target : nullptr, spec.judge ? &spec.judge->target : nullptr}) {
    if (!t) continue;
    if (options_.allow_host) t->allow_address = options_.allow_host;
    t->max_response_bytes = options_.max_response_bytes;
    t->max_sse_event_bytes = options_.max_sse_event_bytes;
  }
  return std::nullopt;
}

std::optional<PreparedJob> SweepManager::prepare(const store::SweepRow& row, const std::shared_ptr<ActiveJob>& active) {
  const std::string& id = row.id;
  auto spec = parse_job_spec(join_secrets(row.spec, row.secret_headers));
  if (!spec) {
    finish(id, "failed", nullptr, "stored spec is invalid: " + spec.error().message);
    return std::nullopt;
  }
  if (auto refused = admit_targets(*spec)) {
    finish(id, "failed", nullptr, fmt::format("'{}' is no longer in the service's allow_targets", *refused));
    return std::nullopt;
  }
  store_->set_resumable(id, false);

  PreparedJob p;
  p.started = store::parse_utc(row.started_at).value_or(std::chrono::system_clock::now());
  std::vector<llm::DatasetEntry> entries;
  if (spec->workload.dataset) {
    auto loaded = load_dataset(*spec->workload.dataset);
    if (!loaded) {
      finish(id, "failed", nullptr, loaded.error().message);
      return std::nullopt;
    }
    entries = std::move(*loaded);
    if (spec->agents > 0) {  // the agents make the same workload from the same content
      const auto meta = store_->dataset(spec->workload.dataset->id);
      p.dataset_content = store_->dataset_content(spec->workload.dataset->id);
      p.dataset_format = meta ? meta->format : std::string("jsonl");
    }
  }
  if (spec->quality) {
    auto loaded = load_dataset(spec->quality->dataset);
    if (!loaded) {
      finish(id, "failed", nullptr, loaded.error().message);
      return std::nullopt;
    }
    loaded->resize(quality_item_count(*spec->quality, loaded->size()));
    p.quality_entries = std::move(*loaded);
  }
  std::string how;
  const double tokens_per_word =
      prompt_calibration(*spec, how, [this, active] { return active->cancel.load() || stopping(); });
  p.tokens_per_word = tokens_per_word;
  auto workload = std::make_shared<const llm::Workload>(
      spec->workload, llm::PromptSynth(tokens_per_word, spec->workload.prefix, spec->workload.seed),
      std::move(entries));
  p.runner = std::make_unique<loadgen::StepRunner>(spec->target, workload, options_.endpoint);
  if (spec->candidate) {
    // The baseline's calibration serves both sides: they are sent the same prompt text.
    p.candidate_runner = std::make_unique<loadgen::StepRunner>(spec->candidate->target, workload, options_.endpoint);
  }
  p.fixed_step_length = rules(spec->kind).step_length(*spec);
  log_line(fmt::format("sweep {} running against {} ({})", id, spec->base_url, how));
  p.spec = std::move(*spec);
  return p;
}

void SweepManager::run(const store::SweepRow& row, const std::shared_ptr<ActiveJob>& active) {
  const std::string& id = row.id;
  auto prepared = prepare(row, active);
  if (!prepared) return;
  PreparedJob& p = *prepared;
  // A job on load agents: its run is open while it runs here; its agents hear "done" at the end.
  struct AgentsRun {
    SweepManager& m;
    loadgen::AgentHub* hub;
    std::string id;
    std::string job;  // its agents' Job, made through the Kubernetes API
    ~AgentsRun() {
      if (hub) hub->close_run(id);
      if (!job.empty() && !m.stopping()) m.delete_agents_job(id, job);  // one left resumable keeps it
    }
  } agents_run{*this, p.spec.agents > 0 ? agent_hub_.get() : nullptr, id, {}};
  if (agents_run.hub) {
    agents_run.hub->open_run(id, p.spec.agents);
    if (options_.agent_jobs.apply) {
      auto made = create_agents_job(id, p.spec.agents);
      if (!made) return finish(id, "failed", nullptr, made.error().message);
      agents_run.job = std::move(*made);
    }
  }
  while (true) {
    if (stopping()) {
      store_->set_resumable(id, true);
      log_line(fmt::format("sweep {} left resumable", id));
      return;
    }
    if (active->cancel) return finish(id, "cancelled", nullptr, "cancelled by request; stored steps kept");
    const auto stored = store_->steps(id);
    std::vector<StepOutcome> outcomes;
    for (const auto& s : stored) {
      auto o = StepOutcome::from_json(s.outcome);
      if (!o) return finish(id, "failed", nullptr, fmt::format("stored step {} is unreadable", s.index));
      o->summary = s.summary;
      o->evaluation = s.evaluation;
      outcomes.push_back(std::move(*o));
    }
    const Action action = next_action(p.spec, outcomes);
    if (const auto* fin = std::get_if<Finish>(&action)) {
      store_->set_progress(id, {{"phase", "done"},
                                {"step", stored.size()},
                                {"steps_planned", stored.size()},
                                {"percent", 100},
                                {"eta_s", 0}});
      return finish(id, "succeeded", with_record(fin->result, row.spec, max_output_tokens(p.spec)),
                    fmt::format("after {} steps", stored.size()));
    }
    if (const auto* fail = std::get_if<Fail>(&action)) return finish(id, "failed", nullptr, fail->reason);
    if (std::chrono::system_clock::now() - p.started > options_.max_total_sweep) {
      return finish(id, "failed", nullptr, "the sweep ran past the service's max_total_sweep_s limit");
    }
    const int index = static_cast<int>(stored.size());
    if (!run_step(row, p, active, std::get<StepOrder>(action), index, plan_progress(p.spec, outcomes).steps_planned)) {
      return;
    }
  }
}

Result<std::string> SweepManager::create_agents_job(const std::string& id, std::uint32_t agents) {
  const json job = agent_job_for(options_.agent_jobs, id, agents);
  const std::string name = job["metadata"]["name"].get<std::string>();
  auto made = create_agent_job(options_.agent_jobs, job);
  if (!made) return made.error();
  log_line(fmt::format("sweep {}: its agents' Job {} {} in namespace {}", id, name,
                       *made == "created" ? "created" : "found (kept)", options_.agent_jobs.namespace_));
  return name;
}

void SweepManager::delete_agents_job(const std::string& id, const std::string& name) {
  auto gone = delete_agent_job(options_.agent_jobs, name);
  log_line(gone ? fmt::format("sweep {}: its agents' Job {} {}", id, name, *gone)
                : fmt::format("sweep {}: its agents' Job {} was not deleted: {}", id, name, gone.error().message));
}

bool SweepManager::pause(const std::shared_ptr<ActiveJob>& active, Nanos length) {
  const auto until = Clock::now() + length;
  while (Clock::now() < until) {
    if (active->cancel || stopping()) return false;
    std::this_thread::sleep_for(std::min<Nanos>(std::chrono::milliseconds(50), until - Clock::now()));
  }
  return true;
}

std::unique_ptr<StepExecutor> SweepManager::executor(const store::SweepRow& row, PreparedJob& p,
                                                     const std::shared_ptr<ActiveJob>& active, const StepOrder& order,
                                                     int index, std::string& why) {
  if (order.kind == StepKind::quality) return quality_executor(p, active, order, index);
  if (order.kind == StepKind::scenario) return scenario_executor(row, p, active, order, index, why);
  loadgen::StepRunner& runner = order.role == Role::candidate ? *p.candidate_runner : *p.runner;
  const bool on_agents = p.spec.agents > 0;
  loadgen::LoadSettings settings = load_settings(p.spec, order, index, row.id, options_.max_connections);
  settings.engine_threads = options_.engine_threads;
  if (on_agents) settings.decide.reset();  // a decision needs every request as it ends, on one process
  auto made = loadgen::plan_load_step(settings, runner.workload().trace_offsets());
  if (!made) {
    why = made.error().message;
    return nullptr;
  }
  loadgen::StepSpec ss = std::move(*made);
  if (on_agents) {
    auto plan = std::make_shared<loadgen::AgentsPlan>();
    plan->hub = agent_hub_.get();
    plan->run = row.id;
    plan->parts = p.spec.agents;
    loadgen::AgentStep sent = agent_step(join_secrets(row.spec, row.secret_headers), order, std::move(settings));
    sent.tokens_per_word = p.tokens_per_word;
    sent.dataset_format = p.dataset_format;
    sent.dataset = p.dataset_content;
    plan->payload = loadgen::to_json(sent);
    ss.agents = std::move(plan);
  }
  return std::make_unique<LoadStep>(p.spec, order, index, runner, std::move(ss), p.fixed_step_length);
}

bool SweepManager::run_step(const store::SweepRow& row, PreparedJob& p, const std::shared_ptr<ActiveJob>& active,
                            const StepOrder& order, int index, int steps_planned) {
  const std::string& id = row.id;
  const auto percent = std::round(1000.0 * index / steps_planned) / 10;
  if (order.pause_before.count() > 0) {
    store_->set_progress(
        id, {{"phase", "cooldown"}, {"step", index}, {"steps_planned", steps_planned}, {"percent", percent}});
    if (!pause(active, order.pause_before)) return true;  // cancelled or stopping: the caller's loop says which
  }
  // A step that never ended twice (the process died in it) is not started a third time.
  const int attempt = store_->begin_step_attempt(id, index);
  if (attempt > 2) {
    finish(
        id, "failed", nullptr,
        fmt::format("step {} was started {} times and never ended (the service stopped or crashed in it); not retried",
                    index, attempt - 1));
    return false;
  }
  std::string why;
  std::unique_ptr<StepExecutor> step = executor(row, p, active, order, index, why);
  if (!step) {
    store_->end_step_attempt(id);
    finish(id, "failed", nullptr, why);
    return false;
  }
  active->enter_step(order, index, steps_planned, step->control(), step->length());
  store_->set_progress(
      id, {{"phase", order.phase}, {"step", index + 1}, {"steps_planned", steps_planned}, {"percent", percent}});
  if (active->cancel) step->control()->cancel();  // a cancel that raced the step's start
  const std::string started_at = store::utc_now();
  const auto began = Clock::now();
  bool over_time = false;
  {
    StepDeadline deadline(*active, p.started + options_.max_total_sweep);
    step->run();
    over_time = deadline.end_step();
  }
  step->after();
  std::string failure = step->failure();
  if (failure.empty() && over_time) {
    failure = fmt::format("the job reached the service's max_total_sweep_s limit during step {}", index);
  }
  if (!failure.empty() || step->cut_short() || active->cancel || stopping()) {
    // Not stored. A failure ends the job; a cancel or a stop is the caller's loop's to say.
    store_->end_step_attempt(id);
    if (failure.empty()) return true;
    finish(id, "failed", nullptr, failure);
    return false;
  }
  store_step(id, index, std::move(step), started_at, std::chrono::duration<double>(Clock::now() - began).count());
  return true;
}

void SweepManager::store_step(const std::string& id, int index, std::unique_ptr<StepExecutor> step,
                              const std::string& started_at, double wall_s) {
  {
    StoredStep stored = step->judge();
    stored.row.outcome["wall_s"] = wall_s;  // warm-up, measured part and drain: how the job's time went
    stored.row.index = index;
    stored.row.started_at = started_at;
    stored.row.finished_at = store::utc_now();
    store_->append_step(id, stored.row, stored.requests, stored.items);
    store_->end_step_attempt(id);
    stats_.steps_run++;
    stats_.requests_sent += stored.requests_sent;
    log_line(fmt::format("sweep {} step {} {}", id, index, stored.log));
    store_->release_memory();
    step.reset();
  }  // the step's records are freed here: hand the pages back, so a long run's resident memory
     // reflects what is live, not its largest step
  memory::return_free_memory();
}

}  // namespace capsweep::sweep

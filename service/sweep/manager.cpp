#include "sweep/manager.hpp"

#include "loadgen/step_runner.hpp"
#include "sweep/orchestrator.hpp"
#include "sweep/spec.hpp"
#include "sweep/step_judge.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

void log_line(const std::string& text) {
  fmt::print(stderr, "{} capsweepd: {}\n", store::utc_now(), text);
  std::fflush(stderr);
}

loadgen::StepSpec step_spec(const JobSpec& spec, const StepOrder& order, int index) {
  loadgen::StepSpec s;
  s.seed = spec.workload.seed * 1'000'003ULL + static_cast<std::uint64_t>(index);
  s.goodput = spec.slo.goodput;
  s.metrics_url = spec.metrics_url;
  s.request_index_base = static_cast<std::uint64_t>(index) << 32;
  s.drain_timeout = spec.kind == JobKind::check ? spec.check.drain_timeout : spec.sweep.drain_timeout;
  // Count-based steps end with their last answer; the duration only bounds them.
  const Nanos bound = std::max<Nanos>(std::chrono::seconds(600), spec.target.request_timeout);
  switch (order.kind) {
    case StepKind::baseline:
      s.mode = loadgen::Mode::concurrency;
      s.concurrency = 1;
      s.requests = order.requests;
      s.duration = bound * static_cast<long>(std::min<std::uint64_t>(order.requests.value_or(1), 1000));
      break;
    case StepKind::probe:
      s.arrival.process = ArrivalProcess::all_at_once;
      s.requests = order.requests;
      s.concurrency = order.concurrency;
      s.duration = bound;
      break;
    default:
      s.arrival = spec.arrival;
      s.concurrency = order.concurrency;
      s.warmup = order.warmup;
      if (spec.arrival.process == ArrivalProcess::all_at_once) {
        s.requests = order.requests;
        s.duration = bound;
      } else {
        s.arrival.rate_rps = order.rate_rps;
        s.duration = order.warmup + order.duration;
        s.requests = order.requests;
      }
      break;
  }
  return s;
}

}  // namespace

struct SweepManager::Active {
  std::string id;
  std::string target_key;
  std::atomic<bool> cancel{false};
  mutable std::mutex m;
  loadgen::StepRunner* runner = nullptr;  // while a step runs
  // Progress of the step in flight.
  std::string phase;
  int step = 0;           // 1-based index of the step in flight
  int steps_planned = 0;
  double rate_rps = 0;
  std::optional<std::uint64_t> step_requests;
  Nanos step_length{0};   // warm-up + measured, 0 for count-based steps
  Nanos fixed_step_length{0};
  Clock::time_point step_started{};
  bool in_step = false;
};

SweepManager::SweepManager(ManagerOptions options)
    : options_(std::move(options)), store_(std::make_unique<store::Store>(options_.db_path)) {}

SweepManager::~SweepManager() { stop(); }

void SweepManager::start() {
  std::lock_guard lock(mutex_);
  if (!workers_.empty()) return;
  const int n = std::max(options_.max_concurrent_sweeps, 1);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

void SweepManager::notify() { wake_.notify_all(); }

bool SweepManager::workers_alive() const noexcept {
  std::lock_guard lock(mutex_);
  return !stopping_ && workers_running_.load() == static_cast<int>(workers_.size()) && !workers_.empty();
}

void SweepManager::stop() {
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mutex_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    for (auto& [id, a] : active_) {
      std::lock_guard al(a->m);
      if (a->runner) a->runner->cancel();
    }
    workers.swap(workers_);
  }
  wake_.notify_all();
  for (auto& t : workers) t.join();
}

CancelOutcome SweepManager::cancel(const std::string& id) {
  if (store_->transition(id, "queued", "cancelled")) {
    store_->finish_sweep(id, "cancelled", nullptr, "cancelled before it started");
    return CancelOutcome::cancelled;
  }
  {
    std::lock_guard lock(mutex_);
    if (auto it = active_.find(id); it != active_.end()) {
      it->second->cancel = true;
      std::lock_guard al(it->second->m);
      if (it->second->runner) it->second->runner->cancel();
      return CancelOutcome::stopping;
    }
  }
  auto row = store_->sweep(id);
  if (!row) return CancelOutcome::not_found;
  if (row->status == "running") {
    // Running but not here (left by a stopped process, not yet resumed): cancel it in the store.
    if (store_->transition(id, "running", "cancelled")) {
      store_->finish_sweep(id, "cancelled", nullptr, "cancelled while waiting to resume");
      return CancelOutcome::cancelled;
    }
  }
  return CancelOutcome::already_finished;
}

std::optional<json> SweepManager::live_progress(const std::string& id) const {
  std::shared_ptr<Active> a;
  {
    std::lock_guard lock(mutex_);
    auto it = active_.find(id);
    if (it == active_.end()) return std::nullopt;
    a = it->second;
  }
  std::lock_guard al(a->m);
  if (a->step == 0) return std::nullopt;
  double fraction = 0;
  double current_left_s = 0;
  json j;
  std::uint64_t done = 0, in_flight = 0;
  double p95 = 0;
  if (a->in_step && a->runner) {
    const auto& p = a->runner->progress();
    done = p.done.load();
    in_flight = p.in_flight.load();
    p95 = p.p95_ttft_ms.load();
    const double elapsed = std::chrono::duration<double>(Clock::now() - a->step_started).count();
    if (a->step_length.count() > 0) {
      const double len = to_s(a->step_length);
      fraction = std::min(elapsed / len, 1.0);
      current_left_s = std::max(len - elapsed, 0.0);
    } else if (a->step_requests && *a->step_requests > 0) {
      fraction = std::min(double(done) / double(*a->step_requests), 1.0);
      current_left_s = fraction > 0 ? elapsed * (1 - fraction) / fraction : 0;
    }
  }
  const int planned = std::max(a->steps_planned, a->step);
  const double percent = 100.0 * (double(a->step - 1) + fraction) / double(planned);
  const double eta = current_left_s + double(planned - a->step) * to_s(a->fixed_step_length);
  j["phase"] = a->phase;
  j["step"] = a->step;
  j["steps_planned"] = planned;
  j["percent"] = std::round(percent * 10) / 10;
  j["eta_s"] = std::round(eta);
  j["current_rate_rps"] = std::isfinite(a->rate_rps) && a->rate_rps > 0 ? json(a->rate_rps) : json(nullptr);
  j["requests_done"] = done;
  j["requests_in_flight"] = in_flight;
  j["p95_ttft_ms_so_far"] = p95;
  return j;
}

std::optional<store::SweepRow> SweepManager::claim() {
  // Resumed sweeps first (left `running` by an earlier process), then the oldest queued.
  std::vector<store::SweepRow> candidates;
  for (const char* status : {"running", "queued"}) {
    auto rows = store_->list_sweeps(std::string(status), 10'000, 0);
    std::reverse(rows.begin(), rows.end());
    for (auto& r : rows) candidates.push_back(std::move(r));
  }
  for (auto& row : candidates) {
    if (active_.count(row.id) || busy_targets_.count(row.target_key)) continue;
    if (row.status == "queued" && !store_->transition(row.id, "queued", "running")) continue;
    if (row.status == "running") log_line(fmt::format("resuming sweep {} after its stored steps", row.id));
    row.status = "running";
    return row;
  }
  return std::nullopt;
}

void SweepManager::worker_loop() {
  ++workers_running_;
  while (true) {
    std::optional<store::SweepRow> row;
    std::shared_ptr<Active> active;
    {
      std::unique_lock lock(mutex_);
      if (stopping_) break;
      try {
        row = claim();
      } catch (const std::exception& e) {
        log_line(fmt::format("queue: {}", e.what()));
      }
      if (!row) {
        wake_.wait_for(lock, options_.poll);
        continue;
      }
      active = std::make_shared<Active>();
      active->id = row->id;
      active->target_key = row->target_key;
      busy_targets_.insert(row->target_key);
      active_[row->id] = active;
    }
    try {
      run(*row, active);
    } catch (const std::exception& e) {
      log_line(fmt::format("sweep {}: internal error: {}", row->id, e.what()));
      try {
        store_->finish_sweep(row->id, "failed", nullptr, "internal error while running the sweep");
      } catch (const std::exception&) {
      }
    }
    {
      std::lock_guard lock(mutex_);
      busy_targets_.erase(row->target_key);
      active_.erase(row->id);
    }
    wake_.notify_all();
  }
  --workers_running_;
}

void SweepManager::run(const store::SweepRow& row, const std::shared_ptr<Active>& active) {
  const auto run_started = Clock::now();
  const std::string& id = row.id;
  auto spec = parse_job_spec(join_secrets(row.spec, row.secret_headers));
  if (!spec) {
    store_->finish_sweep(id, "failed", nullptr, "stored spec is invalid: " + spec.error().message);
    return;
  }
  store_->set_resumable(id, false);
  std::string how;
  const double tokens_per_word = loadgen::calibrate_tokens_per_word(spec->target, how);
  auto workload = std::make_shared<const llm::Workload>(
      spec->workload, llm::PromptSynth(tokens_per_word, spec->workload.shared_prefix_tokens, spec->workload.seed));
  auto runner = std::make_unique<loadgen::StepRunner>(spec->target, workload);
  const Nanos fixed_len = spec->kind == JobKind::check ? spec->check.warmup + spec->check.duration
                                                       : spec->sweep.warmup + spec->sweep.step_duration;
  log_line(fmt::format("sweep {} running against {} ({})", id, spec->base_url, how));

  while (true) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        store_->set_resumable(id, true);
        log_line(fmt::format("sweep {} left resumable", id));
        return;
      }
    }
    if (active->cancel) {
      store_->finish_sweep(id, "cancelled", nullptr, "cancelled by request; stored steps kept");
      stats_.sweeps_finished++;
      log_line(fmt::format("sweep {} cancelled", id));
      return;
    }
    const auto stored = store_->steps(id);
    std::vector<StepOutcome> outcomes;
    for (const auto& s : stored) {
      auto o = StepOutcome::from_json(s.outcome);
      if (!o) {
        store_->finish_sweep(id, "failed", nullptr, fmt::format("stored step {} is unreadable", s.index));
        return;
      }
      o->summary = s.summary;
      o->evaluation = s.evaluation;
      outcomes.push_back(std::move(*o));
    }
    const Action action = next_action(*spec, outcomes);
    if (const auto* fin = std::get_if<Finish>(&action)) {
      store_->finish_sweep(id, "succeeded", fin->result, "");
      store_->set_progress(id, {{"phase", "done"}, {"step", stored.size()}, {"steps_planned", stored.size()},
                                {"percent", 100}, {"eta_s", 0}});
      stats_.sweeps_finished++;
      log_line(fmt::format("sweep {} succeeded after {} steps", id, stored.size()));
      return;
    }
    if (const auto* fail = std::get_if<Fail>(&action)) {
      store_->finish_sweep(id, "failed", nullptr, fail->reason);
      stats_.sweeps_finished++;
      log_line(fmt::format("sweep {} failed: {}", id, fail->reason));
      return;
    }
    const StepOrder order = std::get<StepOrder>(action);
    if (Clock::now() - run_started > options_.max_total_sweep) {
      store_->finish_sweep(id, "failed", nullptr, "the sweep ran past the service's max_total_sweep_s limit");
      stats_.sweeps_finished++;
      return;
    }
    const int index = static_cast<int>(stored.size());
    const Plan plan = plan_progress(*spec, outcomes);
    loadgen::StepSpec ss = step_spec(*spec, order, index);
    if (options_.max_connections > 0 && (ss.concurrency == 0 || ss.concurrency > options_.max_connections)) {
      ss.concurrency = options_.max_connections;
    }
    {
      std::lock_guard al(active->m);
      active->phase = order.phase;
      active->step = index + 1;
      active->steps_planned = plan.steps_planned;
      active->rate_rps = order.rate_rps;
      active->step_requests = order.requests;
      active->step_length = order.duration.count() > 0 ? order.warmup + order.duration : Nanos{0};
      active->fixed_step_length = fixed_len;
      active->step_started = Clock::now();
      active->runner = runner.get();
      active->in_step = true;
    }
    store_->set_progress(id, {{"phase", order.phase}, {"step", index + 1}, {"steps_planned", plan.steps_planned},
                              {"percent", std::round(1000.0 * index / plan.steps_planned) / 10}});
    if (active->cancel) runner->cancel();  // a cancel that raced the step's start
    const std::string started_at = store::utc_now();
    auto result = runner->run(ss);
    {
      std::lock_guard al(active->m);
      active->runner = nullptr;
      active->in_step = false;
    }
    if (!result) {
      store_->finish_sweep(id, "failed", nullptr,
                           fmt::format("step {} could not run: {} ({})", index, result.error().message, result.error().field));
      stats_.sweeps_finished++;
      return;
    }
    if (result->cancelled || active->cancel) continue;  // not stored; the loop decides why
    JudgedStep judged = judge_step(*spec, order, *result);
    judged.row.index = index;
    judged.row.started_at = started_at;
    judged.row.finished_at = store::utc_now();
    store_->append_step(id, judged.row, judged.requests);
    stats_.steps_run++;
    stats_.requests_sent += result->requests.size();
    log_line(fmt::format("sweep {} step {} ({} {}) {}: {}", id, index, order.phase,
                         std::isfinite(order.rate_rps) && order.rate_rps > 0 ? fmt::format("{:.2f} req/s", order.rate_rps) : std::string("-"),
                         judged.row.verdict, judged.outcome.limiting_metric));
  }
}

}  // namespace capsweep::sweep

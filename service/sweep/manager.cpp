#include "sweep/manager.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/json_access.hpp"
#include "core/log.hpp"
#include "core/memory.hpp"
#include "loadgen/agent_hub.hpp"
#include "loadgen/quality_runner.hpp"
#include "loadgen/step_runner.hpp"
#include "sweep/manager_parts.hpp"
#include "sweep/orchestrator.hpp"
#include "sweep/quality_pass.hpp"
#include "sweep/spec.hpp"
#include "sweep/step_judge.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

// The targets a job holds while it runs: its target (each of its replicas), and a
// regression's candidate too (two jobs against one server corrupt both).
std::vector<std::string> target_keys(const store::SweepRow& row) {
  std::vector<std::string> keys{row.target_key};
  const auto hold = [&keys](const json& url) {
    if (url.is_string() && std::find(keys.begin(), keys.end(), url.get<std::string>()) == keys.end())
      keys.push_back(url.get<std::string>());
  };
  for (const json& t : {json_at(row.spec, "target"), json_at(json_at(row.spec, "baseline"), "target"),
                        json_at(json_at(row.spec, "candidate"), "target")}) {
    hold(json_at(t, "base_url"));
    for (const json& url : json_at(t, "base_urls")) hold(url);
  }
  return keys;
}

}  // namespace

void log_line(const std::string& text) {
  log::info(text);
}

SweepManager::SweepManager(ManagerOptions options)
    : options_(std::move(options)),
      store_(std::make_unique<store::Store>(options_.db_path)),
      agent_hub_(std::make_unique<loadgen::AgentHub>([this] {
        loadgen::AgentHubSettings s;
        s.max_offset_error = options_.agents_max_clock_error;
        s.join_timeout = options_.agents_join_timeout;
        return s;
      }())) {}

SweepManager::~SweepManager() {
  stop();
}

void SweepManager::start() {
  prune();
  std::lock_guard lock(mutex_);
  if (!workers_.empty()) return;
  const int n = std::max(options_.max_concurrent_sweeps, 1);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

void SweepManager::notify() {
  wake_.notify_all();
}

bool SweepManager::workers_alive() const noexcept {
  std::lock_guard lock(mutex_);
  return !stopping_ && workers_running_.load() == static_cast<int>(workers_.size()) && !workers_.empty();
}

bool SweepManager::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
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

void SweepManager::finish(const std::string& id, const std::string& status, const json& result,
                          const std::string& why) {
  store_->finish_sweep(id, status, result, status == "succeeded" ? std::string() : why);
  stats_.sweeps_finished++;
  log_line(fmt::format("sweep {} {}{}", id, status, why.empty() ? std::string() : ": " + why));
}

void SweepManager::prune() {
  if (options_.retention_max_age_s <= 0 && options_.retention_max_sweeps == 0) return;
  const auto now = Clock::now();
  {
    std::lock_guard lock(mutex_);
    if (last_prune_ != Clock::time_point{} && now - last_prune_ < std::chrono::hours(1)) return;
    last_prune_ = now;
  }
  try {
    const auto n = store_->prune_finished(options_.retention_max_age_s, options_.retention_max_sweeps);
    if (n > 0) log_line(fmt::format("retention: removed {} finished sweeps", n));
  } catch (const std::exception& e) {
    log_line(fmt::format("retention: {}", e.what()));
  }
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
  std::shared_ptr<ActiveJob> a;
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
  if (!a->latest_window.is_null()) {
    // A scenario's last closed window, without the histogram kept for pooling.
    json w = a->latest_window;
    w.erase("ttft_histogram");
    j["window"] = std::move(w);
  }
  return j;
}

std::vector<std::pair<std::string, json>> SweepManager::scenario_windows() const {
  std::vector<std::shared_ptr<ActiveJob>> running;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, a] : active_) running.push_back(a);
  }
  std::vector<std::pair<std::string, json>> out;
  for (const auto& a : running) {
    std::lock_guard al(a->m);
    if (!a->latest_window.is_null()) out.emplace_back(a->id, a->latest_window);
  }
  return out;
}

std::shared_ptr<ActiveJob> SweepManager::claim() {
  // The store is read without the manager's lock (a locked database must not stall the API's
  // progress reads); what is busy is copied under it first and checked again at the end.
  std::set<std::string> busy, active_ids;
  {
    std::lock_guard lock(mutex_);
    busy = busy_targets_;
    for (const auto& [id, a] : active_) active_ids.insert(id);
  }
  // Resumed sweeps first (left `running` by an earlier process), then the oldest queued.
  for (const char* status : {"running", "queued"}) {
    auto rows = store_->list_sweeps(std::string(status), 10'000, 0);
    std::reverse(rows.begin(), rows.end());
    for (auto& row : rows) {
      const std::vector<std::string> keys = target_keys(row);
      auto any_busy = [&keys](const std::set<std::string>& set) {
        return std::any_of(keys.begin(), keys.end(), [&set](const std::string& k) { return set.count(k) > 0; });
      };
      if (active_ids.count(row.id) || any_busy(busy)) continue;
      {
        // Reserve the targets before the store transition, so two workers cannot both take one.
        std::lock_guard lock(mutex_);
        if (stopping_ || active_.count(row.id) || any_busy(busy_targets_)) continue;
        busy_targets_.insert(keys.begin(), keys.end());
      }
      const bool resumed = row.status == "running";
      if (!resumed && !store_->transition(row.id, "queued", "running")) {
        std::lock_guard lock(mutex_);
        for (const auto& k : keys) busy_targets_.erase(k);
        continue;
      }
      auto active = std::make_shared<ActiveJob>();
      active->id = row.id;
      active->target_keys = keys;
      {
        std::lock_guard lock(mutex_);
        active_[row.id] = active;
      }
      if (resumed) log_line(fmt::format("resuming sweep {} after its stored steps", row.id));
      return active;
    }
  }
  return nullptr;
}

void SweepManager::worker_loop() {
  ++workers_running_;
  while (!stopping()) {
    std::shared_ptr<ActiveJob> active;
    try {
      // No job is taken while the database cannot be written (a full disk): its steps could
      // not be stored, so running them would only load the target.
      if (store_->writable()) active = claim();
    } catch (const std::exception& e) {
      log_line(fmt::format("queue: {}", e.what()));
    }
    if (!active) {
      prune();
      memory::trim_if_pending();  // what large API answers freed since the last trim
      std::unique_lock lock(mutex_);
      if (!stopping_) wake_.wait_for(lock, options_.poll);
      continue;
    }
    const std::string id = active->id;
    try {
      auto row = store_->sweep(id);
      if (row) run(*row, active);
    } catch (const store::StoreError& e) {
      // The cause is named in the job: a full disk or a broken file is not "internal".
      log_line(fmt::format("sweep {}: database: {}", id, e.what()));
      try {
        finish(id, "failed", nullptr, fmt::format("the database could not be written: {}", e.what()));
      } catch (const std::exception&) {
      }
    } catch (const std::exception& e) {
      log_line(fmt::format("sweep {}: internal error: {}", id, e.what()));
      try {
        finish(id, "failed", nullptr, "internal error while running the sweep; see the service log");
      } catch (const std::exception&) {
      }
    }
    {
      std::lock_guard lock(mutex_);
      for (const auto& k : active->target_keys) busy_targets_.erase(k);
      active_.erase(id);
    }
    active.reset();
    memory::return_free_memory();  // the job's runner, workload and connections are gone too
    wake_.notify_all();
  }
  --workers_running_;
}

}  // namespace capsweep::sweep

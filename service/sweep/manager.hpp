#pragma once
// The job queue and the workers that run sweeps. At most `max_concurrent_sweeps` sweeps run
// at once and at most one per target base_url (two sweeps against one server corrupt both);
// the others wait, visible as `queued`. Each sweep runs on a worker thread of its own and the
// load engine on threads of its own, so API traffic cannot disturb step timing. The store is
// the truth: a worker asks the orchestrator what to do from the stored steps, runs the step,
// writes it in one transaction, and asks again. A sweep found `running` at start-up (after a
// crash or SIGTERM) is resumed the same way.

#include "store/store.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace capsweep::sweep {

struct ManagerOptions {
  std::string db_path;
  int max_concurrent_sweeps = 1;
  std::chrono::seconds max_total_sweep{6 * 3600};  // a sweep running longer fails
  std::chrono::milliseconds poll{1000};             // re-check the queue at least this often
  std::uint32_t max_connections = 1024;             // cap on requests in flight per sweep (0: none)
};

// Counters for /metrics.
struct ManagerStats {
  std::atomic<std::uint64_t> steps_run{0};
  std::atomic<std::uint64_t> requests_sent{0};
  std::atomic<std::uint64_t> sweeps_finished{0};
};

enum class CancelOutcome { cancelled, stopping, not_found, already_finished };

class SweepManager {
 public:
  explicit SweepManager(ManagerOptions options);
  ~SweepManager();
  SweepManager(const SweepManager&) = delete;
  SweepManager& operator=(const SweepManager&) = delete;

  // Starts the workers; sweeps left `running` by a previous process are resumed first.
  void start();
  // A sweep was queued: wake a worker.
  void notify();
  // Cancels a queued sweep at once, or stops a running one within about a second (its stored
  // steps stay).
  CancelOutcome cancel(const std::string& id);
  // SIGTERM: stops the steps in flight (they are not stored), leaves running sweeps `running`
  // and marked resumable, and joins the workers.
  void stop();

  // Live progress of a sweep running here: {"phase", "step", "steps_planned", "percent",
  // "eta_s", "current_rate_rps", "requests_done", "requests_in_flight", "p95_ttft_ms_so_far"}.
  std::optional<nlohmann::json> live_progress(const std::string& id) const;
  bool workers_alive() const noexcept;
  const ManagerStats& stats() const noexcept { return stats_; }

 private:
  struct Active;
  void worker_loop();
  std::optional<store::SweepRow> claim();
  void run(const store::SweepRow& row, const std::shared_ptr<Active>& active);

  ManagerOptions options_;
  std::unique_ptr<store::Store> store_;
  ManagerStats stats_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::set<std::string> busy_targets_;
  std::map<std::string, std::shared_ptr<Active>> active_;
  std::vector<std::thread> workers_;
  std::atomic<int> workers_running_{0};
};

}  // namespace capsweep::sweep

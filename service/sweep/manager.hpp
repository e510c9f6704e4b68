#pragma once
// The job queue and the workers that run sweeps. At most `max_concurrent_sweeps` sweeps run
// at once and at most one per target base_url (two sweeps against one server corrupt both);
// the others wait, visible as `queued`. Each sweep runs on a worker thread of its own and the
// load engine on threads of its own, so API traffic cannot disturb step timing. The store is
// the truth: a worker asks the orchestrator what to do from the stored steps, runs the step,
// writes it in one transaction, and asks again. A sweep found `running` at start-up (after a
// crash or SIGTERM) is resumed the same way.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "core/time.hpp"
#include "llm/dataset.hpp"
#include "llm/workload.hpp"
#include "store/store.hpp"
#include "sweep/agent_jobs.hpp"

namespace boost::asio {
class io_context;
}
namespace capsweep::loadgen {
class Endpoint;
class AgentHub;
struct StepResult;
struct QualityReply;
}  // namespace capsweep::loadgen

namespace capsweep::sweep {

struct ManagerOptions {
  std::string db_path;
  int max_concurrent_sweeps = 1;
  // A sweep running longer (wall time since it first started, across restarts) fails; a
  // step in flight at the limit is stopped.
  std::chrono::seconds max_total_sweep{6 * 3600};
  std::chrono::milliseconds poll{1000};  // re-check the queue at least this often
  std::uint32_t max_connections = 1024;  // cap on requests in flight per sweep (0: none)
  // The most engine threads a load step may run on (loadgen::engine_parts picks by its load).
  std::uint32_t engine_threads = 1;
  // Whether a host or address may be contacted (the service's allow-list); checked again
  // when a sweep is claimed and on every address the load engine connects to. Empty: any.
  std::function<bool(std::string_view host)> allow_host;
  std::uint64_t max_response_bytes = 16 << 20;  // per answer of a target
  std::size_t max_sse_event_bytes = 1 << 20;    // per SSE event of a target
  // Retention of finished sweeps (0: keep), applied at start and every hour.
  double retention_max_age_s = 0;
  std::uint64_t retention_max_sweeps = 0;
  // Load agents: the clock error a step accepts of them, and how long it waits for them.
  std::chrono::nanoseconds agents_max_clock_error = std::chrono::milliseconds(1);
  std::chrono::nanoseconds agents_join_timeout = std::chrono::seconds(60);
  // Whether (apply) and how capsweepd makes a job's agents' Job through the Kubernetes API.
  AgentJobApi agent_jobs;
  // The endpoint every step's requests go through (a loadgen::EndpointFactory); empty: HTTP(S)
  // to the sweep's target. Tests put an in-process fake here.
  std::function<std::unique_ptr<loadgen::Endpoint>(boost::asio::io_context&)> endpoint;
};

// Counters for /metrics.
struct ManagerStats {
  std::atomic<std::uint64_t> steps_run{0};
  std::atomic<std::uint64_t> requests_sent{0};
  std::atomic<std::uint64_t> sweeps_finished{0};
};

struct StepOrder;
struct JobSpec;
struct ActiveJob;    // a job running here (manager_parts.hpp)
struct PreparedJob;  // what a claimed job prepared for all its steps (manager_parts.hpp)
class StepExecutor;  // one step's own part of the step skeleton (manager_parts.hpp)

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
  // The last stored window of each scenario running here (id, row), for /metrics.
  std::vector<std::pair<std::string, nlohmann::json>> scenario_windows() const;
  const ManagerStats& stats() const noexcept { return stats_; }
  // Where load agents meet the jobs that ask for them (spec field "agents").
  loadgen::AgentHub& agent_hub() noexcept { return *agent_hub_; }

 private:
  void worker_loop();
  // Claims the next sweep to run (a resumed one first) and registers it as active.
  std::shared_ptr<ActiveJob> claim();
  void run(const store::SweepRow& row, const std::shared_ptr<ActiveJob>& active);
  // Re-checks every host the job contacts against the allow-list (it may have changed since
  // the job was queued) and sets the service's caps on each target; the refused host or URL.
  std::optional<std::string> admit_targets(JobSpec& spec) const;
  // Parses the stored spec, re-checks the allow-list and calibrates prompts; nullopt after
  // finishing the sweep as failed.
  std::optional<PreparedJob> prepare(const store::SweepRow& row, const std::shared_ptr<ActiveJob>& active);
  // A stored dataset's entries, checked against the sha256 the job recorded.
  Result<std::vector<llm::DatasetEntry>> load_dataset(const llm::DatasetRef& ref);
  // The most output tokens a request of the job may ask: the distribution's bound, or the
  // dataset's longest output; nullopt when unbounded or unknown.
  std::optional<double> max_output_tokens(const JobSpec& spec);
  // The one step skeleton: pause, attempt, progress, the time limit's watch around the run,
  // judge, store, log. The step's own part is its kind's StepExecutor. False when the job
  // ended meanwhile (failed); true when it goes on (or was cancelled or stopped: the caller's
  // loop says which).
  bool run_step(const store::SweepRow& row, PreparedJob& p, const std::shared_ptr<ActiveJob>& active,
                const StepOrder& order, int index, int steps_planned);
  // Judges a step that ran to its end and stores it (its rows, its attempt ended), logs it and
  // frees its records.
  void store_step(const std::string& id, int index, std::unique_ptr<StepExecutor> step, const std::string& started_at,
                  double wall_s);
  // The step's executor for its kind: a load step (manager_run.cpp), a regression's quality
  // step (manager_quality.cpp) or a scenario's step (manager_scenario.cpp). Null, with the
  // reason in `why`, when the step cannot be set up.
  std::unique_ptr<StepExecutor> executor(const store::SweepRow& row, PreparedJob& p,
                                         const std::shared_ptr<ActiveJob>& active, const StepOrder& order, int index,
                                         std::string& why);
  std::unique_ptr<StepExecutor> quality_executor(PreparedJob& p, const std::shared_ptr<ActiveJob>& active,
                                                 const StepOrder& order, int index);
  std::unique_ptr<StepExecutor> scenario_executor(const store::SweepRow& row, PreparedJob& p,
                                                  const std::shared_ptr<ActiveJob>& active, const StepOrder& order,
                                                  int index, std::string& why);
  // Waits `length` unless the job is cancelled or the service stops (false then).
  bool pause(const std::shared_ptr<ActiveJob>& active, Nanos length);
  // A job's agents' Job through the Kubernetes API (options_.agent_jobs): made when the job
  // starts (its name), deleted when it ends.
  Result<std::string> create_agents_job(const std::string& id, std::uint32_t agents);
  void delete_agents_job(const std::string& id, const std::string& name);
  // The one way a sweep ends here: store the terminal status, count it, log it.
  void finish(const std::string& id, const std::string& status, const nlohmann::json& result, const std::string& why);
  bool stopping() const;
  void prune();

  ManagerOptions options_;
  std::unique_ptr<store::Store> store_;
  ManagerStats stats_;
  std::unique_ptr<loadgen::AgentHub> agent_hub_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::set<std::string> busy_targets_;
  std::map<std::string, std::shared_ptr<ActiveJob>> active_;
  std::vector<std::thread> workers_;
  std::atomic<int> workers_running_{0};
  std::chrono::steady_clock::time_point last_prune_{};
};

}  // namespace capsweep::sweep

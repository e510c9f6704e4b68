#pragma once
// Internal to sweep/: what the manager's files share (manager.cpp queues and claims jobs,
// manager_run.cpp runs a job's loop, the one step skeleton and load steps,
// manager_quality.cpp a regression's quality steps, manager_scenario.cpp a scenario's step):
// the record of a running job, the per-step time limit, what a claimed job has prepared, a
// step kind's executor, and how an ordered step becomes the load engine's settings.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "loadgen/load_plan.hpp"
#include "loadgen/step_runner.hpp"
#include "sweep/manager.hpp"
#include "sweep/orchestrator.hpp"
#include "sweep/spec.hpp"

namespace capsweep::sweep {

using Clock = std::chrono::steady_clock;

struct ActiveJob {
  std::string id;
  std::vector<std::string> target_keys;  // the targets it holds (a regression: both sides)
  std::atomic<bool> cancel{false};
  mutable std::mutex m;
  std::condition_variable step_ended;     // wakes the step's time-limit watch
  loadgen::RunControl* runner = nullptr;  // while a step runs
  // Progress of the step in flight.
  std::string phase;
  int step = 0;  // 1-based index of the step in flight
  int steps_planned = 0;
  double rate_rps = 0;
  std::optional<std::uint64_t> step_requests;
  Nanos step_length{0};  // warm-up + measured, 0 for count-based steps
  Nanos fixed_step_length{0};
  Clock::time_point step_started{};
  bool in_step = false;
  nlohmann::json latest_window;  // a scenario's last stored window (null otherwise)

  // A step starts: what live progress shows from now on.
  void enter_step(const StepOrder& order, int index, int planned, loadgen::RunControl* r, Nanos fixed_length) {
    std::lock_guard al(m);
    phase = order.phase;
    step = index + 1;
    steps_planned = planned;
    rate_rps = order.rate_rps;
    step_requests = order.requests;
    step_length = order.duration.count() > 0 ? order.warmup + order.duration : Nanos{0};
    fixed_step_length = fixed_length;
    step_started = Clock::now();
    runner = r;
    in_step = true;
  }
  // The same step goes on with another run (a quality step's judge after its answers).
  void switch_runner(loadgen::RunControl* r) {
    std::lock_guard al(m);
    runner = r;
    if (cancel && r) r->cancel();
  }
};

// The total time limit holds inside a step too: while a step runs, a watch thread cancels its
// runner when the sweep's time is up. end_step() (or the destructor) ends the watch.
class StepDeadline {
 public:
  StepDeadline(ActiveJob& a, std::chrono::system_clock::time_point limit_at)
      : a_(a), watch_([this, limit_at] {
          std::unique_lock al(a_.m);
          if (!a_.step_ended.wait_until(al, limit_at, [this] { return !a_.in_step; })) {
            over_time_ = true;
            if (a_.runner) a_.runner->cancel();
          }
        }) {}
  ~StepDeadline() { end_step(); }
  StepDeadline(const StepDeadline&) = delete;
  StepDeadline& operator=(const StepDeadline&) = delete;
  // Marks the step ended; true when the limit stopped it.
  bool end_step() {
    {
      std::lock_guard al(a_.m);
      a_.runner = nullptr;
      a_.in_step = false;
    }
    a_.step_ended.notify_all();
    if (watch_.joinable()) watch_.join();
    return over_time_;
  }

 private:
  ActiveJob& a_;
  bool over_time_ = false;  // written by the watch, read after joining it
  std::thread watch_;
};

// What a claimed sweep needs for all its steps.
struct PreparedJob {
  JobSpec spec;
  std::unique_ptr<loadgen::StepRunner> runner;
  // A regression job: the candidate's runner (the same workload, so the same prompts), and the
  // items of its quality checks.
  std::unique_ptr<loadgen::StepRunner> candidate_runner;
  std::vector<llm::DatasetEntry> quality_entries;
  std::chrono::system_clock::time_point started;  // first start, across restarts
  Nanos fixed_step_length{0};
  // What load agents are sent besides the step (spec field "agents"): the calibration, and
  // the workload's dataset.
  double tokens_per_word = 1;
  std::optional<std::string> dataset_format, dataset_content;
};

// A judged step, ready for the store (its index and times are the skeleton's): the step row,
// its request rows or quality items, how many requests it sent, and the tail of its log line.
struct StoredStep {
  store::StepRow row;
  std::vector<store::RequestRow> requests;
  std::vector<store::QualityItemRow> items;
  std::uint64_t requests_sent = 0;
  std::string log;
};

// One step kind's own part of the step skeleton (SweepManager::run_step): what it sends, what
// watches it, how it is judged. The skeleton owns the rest: the attempt count, progress, the
// time limit, cancel and stop, the store, the log and freeing the step's memory.
class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // What a cancel and the time limit stop while run() runs.
  virtual loadgen::RunControl* control() = 0;
  // The step's length as progress shows it (0 when it ends with its last answer).
  virtual Nanos length() const = 0;
  // Sends the step; the time limit's watch runs meanwhile.
  virtual void run() = 0;
  // After the watch has ended: what watched the load is stopped.
  virtual void after() {}
  // Why the job cannot go on ("" when it can) and whether the run was cut short (not stored).
  virtual std::string failure() const = 0;
  virtual bool cut_short() const = 0;
  // The step judged, for the store.
  virtual StoredStep judge() = 0;
};

// The settings of one ordered step of a job (loadgen::plan_load_step makes the engine's of
// them): its shape, the job's arrivals, draw, timeouts, goodput, prefix cache and gauges
// source, and the service's cap on requests in flight.
loadgen::LoadSettings load_settings(const JobSpec& spec, const StepOrder& order, int index, const std::string& job_id,
                                    std::uint32_t max_connections);
// A line of the service's log.
void log_line(const std::string& text);

}  // namespace capsweep::sweep

#pragma once
// What watches a scenario while its load runs, on a thread of its own: every 100 ms the
// readiness URL; at each window's end the replica counts (a Prometheus server's instant
// queries, or gauges of the target's metrics text) and the target's gauges; and the windows
// themselves, closed as their requests end (core/windows) and stored one by one, each with
// the replica counts and readiness read at its end and the events that happened in it
// (readiness flips, replica changes, the spike, the first token). The load engine's thread
// hands it every request as it is scheduled and as it ends.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "core/profile.hpp"
#include "core/record.hpp"
#include "core/windows.hpp"
#include "sweep/spec.hpp"

namespace capsweep::store {
class Store;
}

namespace capsweep::sweep {

class ScenarioWatch {
 public:
  struct Options {
    std::function<bool(std::string_view)> allow_address;  // the service's allow-list (empty: any)
    std::uint64_t max_response_bytes = 16 << 20;
    // The requests in flight now (the step runner's registry): for windows closing late.
    std::function<std::vector<LiveRequest>()> live;
    std::function<std::uint64_t()> in_flight;
    // A window was stored: its row (for live progress and /metrics).
    std::function<void(const nlohmann::json&)> on_window;
    // A replica source failed for good (a query Prometheus rejects): the reason.
    std::function<void(const std::string&)> on_fatal;
  };

  ScenarioWatch(const JobSpec& spec, const Profile& profile, std::string sweep_id, store::Store& store,
                Options options);
  ~ScenarioWatch();
  ScenarioWatch(const ScenarioWatch&) = delete;
  ScenarioWatch& operator=(const ScenarioWatch&) = delete;

  // Reads every replica query once: the server's own message when it rejects one (the job
  // fails before any load), "" when they all answer.
  std::string probe_replica_source();
  // Starts the thread; `origin` is the load's time zero (the step's).
  void start(SteadyClock::time_point origin);
  // Called on the load engine's thread.
  void scheduled(Nanos at);
  void ended(const RequestRecord& rec);
  // Stops the thread, closes and stores the windows left; the events seen.
  nlohmann::json stop();
  // The earliest requests of every 100 ms of the step (read after stop()).
  const EarliestRequests& requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsweep::sweep

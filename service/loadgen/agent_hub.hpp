#pragma once
// capsweepd's side of load agents (capsweep-agent): where a step split over N agent
// processes by index meets them. Agents dial in (pull: capsweepd never looks for them):
// register with a run id, an index and an epoch, poll for the step, acknowledge its schedule
// digest with their clock estimate, wait for go {t0}, run their share, send heartbeats and
// their raw records. The API's agent routes call the agent side (JSON in, JSON out); a step's
// runner calls run_step. Faults are verdicts: an agent lost (no message for
// heartbeat_loss), late to its go, with a clock error above max_offset_error, with another
// schedule digest, or replaced mid-step makes the step invalid, and the other agents are
// told to stop: the load never silently shrinks. Thread-safe; no I/O of its own.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/time.hpp"
#include "loadgen/agent_ledger.hpp"
#include "loadgen/agent_wire.hpp"
#include "loadgen/step_runner.hpp"

namespace capsweep::loadgen {

struct AgentHubSettings {
  Nanos join_timeout = std::chrono::seconds(60);   // for every agent to register and acknowledge a step
  Nanos go_lead = std::chrono::milliseconds(500);  // t0 this long after the last acknowledgement
  Nanos heartbeat_loss = std::chrono::seconds(3);  // an agent silent this long mid-step is lost
  Nanos max_offset_error = std::chrono::milliseconds(1);
  Nanos end_grace = std::chrono::seconds(10);  // past the step's drain deadline, for the last records
};

// What a step run on agents brought back.
struct AgentsStep {
  std::optional<SteadyClock::time_point> t0;  // the step's origin on capsweepd's clock (none: never went)
  AgentsOutcome outcome;
  std::vector<IndexedRecord> records;  // every agent's, as received
  bool cancelled = false;
};

class AgentHub {
 public:
  explicit AgentHub(AgentHubSettings settings = {});

  // The agent side: each takes a message (schema/agent-protocol.schema.json) and answers one,
  // or an error (invalid: a malformed message, naming the field; not_found: register first;
  // conflict: an old epoch).
  // A run is registered to only when it is open, or when `job_parts` says the caller found
  // the job (its agents' count): unknown runs are refused (not_found), and no run keeps more
  // agents than its parts.
  Result<nlohmann::json> register_agent(const nlohmann::json& msg, std::optional<std::uint32_t> job_parts = {});
  Result<nlohmann::json> poll(const nlohmann::json& msg);
  Result<nlohmann::json> heartbeat(const nlohmann::json& msg);
  Result<nlohmann::json> records(const nlohmann::json& msg);

  // The run side. A run (a job) is opened with its agents' count before its first step and
  // closed when the job ends: its agents then hear "done" and exit.
  void open_run(const std::string& run, std::uint32_t parts);
  void close_run(const std::string& run);
  // Offers a step to the run's agents and runs it: waits for every agent to acknowledge the
  // digest, sets t0 (calls on_go with it), collects records until every agent is done, a
  // fault, `cancelled()` or the step's `length` (its drain deadline) plus end_grace. Every
  // record is checked against `expect` (agent_ledger.hpp) before it is kept.
  AgentsStep run_step(const std::string& run, const nlohmann::json& payload, std::uint64_t digest,
                      std::shared_ptr<const StepExpectation> expect, Nanos length,
                      const std::function<bool()>& cancelled,
                      const std::function<void(SteadyClock::time_point)>& on_go = {});
  // The run's agents as the API shows them (null when no such run is open).
  nlohmann::json status(const std::string& run) const;

  const AgentHubSettings& settings() const noexcept { return settings_; }

 private:
  struct Agent {
    std::uint64_t epoch = 0;
    SteadyClock::time_point last_seen{};
    double offset_ms = 0, offset_error_ms = 0;
  };
  struct Share {  // an agent's part of the step in flight
    bool acked = false, done = false;
    std::uint64_t epoch = 0;
    AgentShare report;
    ShareLedger ledger;
  };
  enum class Phase { none, offered, go, ended };
  struct Run {
    std::uint32_t parts = 1;
    bool opened = false;  // by its job (open_run); before that its agents wait
    std::map<std::uint32_t, Agent> agents;
    std::uint64_t seq = 0;  // the step in flight (or last): 1, 2, ...
    Phase phase = Phase::none;
    nlohmann::json payload;
    std::uint64_t digest = 0;
    std::shared_ptr<const StepExpectation> expect;
    SteadyClock::time_point t0{};
    std::vector<Share> shares;
    std::vector<IndexedRecord> records;
    std::optional<std::uint32_t> fault_agent;
    std::string fault;  // "" while valid
  };
  // Reads the identifying fields of a message and finds its agent; an old epoch is refused.
  struct Who {
    Run* run = nullptr;
    Agent* agent = nullptr;
    std::uint32_t index = 0;
    std::uint64_t epoch = 0;
  };
  Result<Who> identify(const nlohmann::json& msg, bool registering, std::optional<std::uint32_t> job_parts = {});
  // The run of `run_id`; a registration for a job the caller found (`job_parts`) makes it, to
  // wait for its job, while fewer than kWaitingRuns wait.
  Result<Run*> find_run(const std::string& run_id, bool registering, std::optional<std::uint32_t> job_parts);
  void set_fault(Run& r, std::uint32_t index, std::string why);
  // Keeps a checked batch (and, with `done`, the agent's summary) of agent `index`.
  void take_records(Run& r, std::uint32_t index, std::vector<IndexedRecord>& batch,
                    const std::optional<ShareSummary>& done);
  // Forgets a closed run's id once more than kClosedKept are remembered, oldest first.
  void remember_closed(const std::string& run);
  // The state an agent is told: "step", "go", "abort", "wait" or "done".
  nlohmann::json tell(const Run& r, std::uint32_t index) const;

  AgentHubSettings settings_;
  mutable std::mutex m_;
  std::condition_variable changed_;
  std::map<std::string, Run> runs_;
  std::set<std::string> closed_;
  std::deque<std::string> closed_order_;
  static constexpr std::size_t kClosedKept = 1024;
  // Runs whose agents came before their job was claimed, at most.
  static constexpr std::size_t kWaitingRuns = 256;
};

}  // namespace capsweep::loadgen

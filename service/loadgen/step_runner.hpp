#pragma once
// Runs ONE step against a target: dispatches requests on schedule (open loop) or keeps N in
// flight (closed loop) on a dedicated generator thread, records every request into the core's
// StepAccumulator as it ends, watches itself (schedule lag, event-loop delay, CPU) and the
// target (/metrics every scrape interval, on a thread of its own), and returns the step's
// metrics. Progress can be read and the step cancelled from any thread.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/backlog.hpp"
#include "core/decide.hpp"
#include "core/lengths.hpp"
#include "core/metrics.hpp"
#include "core/schedule.hpp"
#include "core/trace_context.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"
#include "loadgen/calibrate.hpp"
#include "loadgen/endpoint.hpp"
#include "observe/prom_query.hpp"
#include "observe/server_gauges.hpp"

namespace capsweep::loadgen {

class AgentHub;
struct StepExpectation;
struct StepPlan;

enum class Mode { rate, concurrency };

// A step run by load agents (capsweep-agent, agent_hub.hpp) rather than this process's own
// engine threads: `parts` agents of run `run`, each sent `payload` (what it needs to make
// the same StepSpec) and running the requests j ≡ its index (mod parts).
struct AgentsPlan {
  AgentHub* hub = nullptr;
  std::string run;
  std::uint32_t parts = 1;
  nlohmann::json payload;
};

// An agent's share of a step: the requests j ≡ part (mod parts), on one engine part.
struct StepSlice {
  std::uint32_t part = 0, parts = 1;
};

// A rate step that ends once its SLO verdict is decided (core/decide.hpp); its `duration` is
// then its longest.
struct DecidedStop {
  SloSpec slo;
  DecideSettings settings;
};

struct StepSpec {
  Mode mode = Mode::rate;
  ArrivalSpec arrival;            // rate mode
  std::uint32_t concurrency = 0;  // concurrency mode: in flight; rate mode: cap (0 = none)
  // Concurrency mode: each user waits a draw of this (milliseconds) after an answer before
  // sending its next request (none: at once).
  std::optional<LengthDist> think_time_ms;
  Nanos duration = std::chrono::seconds(60);
  std::optional<std::uint64_t> requests;  // send exactly this many (all_at_once needs it)
  Nanos warmup{0};
  Nanos drain_timeout = std::chrono::seconds(60);
  std::uint64_t seed = 0;
  TraceId trace_id;  // the step's trace: every request carries its traceparent (none: no header)
  GoodputBounds goodput;
  Nanos lag_bound = std::chrono::milliseconds(5);  // schedule lag p99 above this: generator_limited
  double cpu_saturation = 0.9;                     // generator CPU share above this: generator_limited
  std::string metrics_url;                         // "" = no scraping
  std::optional<observe::PromSource> prometheus;   // the gauges from a Prometheus server instead
  Nanos scrape_interval = std::chrono::seconds(1);
  std::uint64_t request_index_base = 0;  // distinct prompts across steps
  // The salt of the step's prompts (workload.prefix.cache cold or warm: nothing sent before
  // this step can be cached for it; 0: prompts as the seed makes them), and whether each
  // shared prefix is sent once before the step, unmeasured (warm).
  std::uint64_t prompt_salt = 0;
  bool warm_prefixes = false;
  // A schedule made beforehand (a scenario's profile), sent as it is; `duration` is then its
  // length (the measured window ends there).
  std::shared_ptr<const Schedule> schedule;
  // false: the per-request rows (requests.csv) are not kept; a long scenario keeps windows.
  bool keep_rows = true;
  // Samples each latency of the step's summary keeps exactly before folding into 2%-wide
  // buckets (a scenario keeps few: its windows are its record, its memory stays flat).
  std::size_t exact_samples = SampleSet::kDefaultExactCapacity;
  // Called on the generator thread when a request is scheduled (its scheduled time) and when
  // it ends (its final record): incremental views of the step (a scenario's windows). They
  // must not block.
  std::function<void(Nanos scheduled)> on_scheduled;
  std::function<void(const RequestRecord& rec)> on_ended;
  // Rate mode: end the step once its verdict is decided. The measured window then ends at the
  // decision, and the requests in flight drain as at a fixed step's end.
  std::optional<DecidedStop> decide;
  // Keep a registry of the requests in flight, for live_requests().
  bool track_live = false;
  // The most engine threads (parts) the step may run on; engine_parts() says how many it does.
  std::uint32_t engine_threads = 1;
  // Run by load agents (capsweepd's side): the step's records come from them.
  std::shared_ptr<const AgentsPlan> agents;
  // An agent's side: only this share of the step, from the origin `start_at` (its go, on this
  // process's clock; none: 20 ms after run() begins), each ended request's record handed to
  // `on_record` with its index on the generator thread (it must not block).
  std::optional<StepSlice> slice;
  std::optional<SteadyClock::time_point> start_at;
  std::function<void(std::uint64_t index, const RequestRecord& rec)> on_record;
  // Test hook: block the dispatcher (the whole generator thread) for `stall` before request
  // `stall_before`, as a generator starved of CPU would be.
  std::optional<std::uint64_t> stall_before;
  Nanos stall{0};
  // Test hook: request `fail_request` throws inside the generator, as bad_alloc would.
  std::optional<std::uint64_t> fail_request;
};

// One request of a step, as stored and exported (requests.csv): times in ms from the step's
// origin, latencies from the schedule; NaN where a request has none.
struct RequestRow {
  std::uint64_t index = 0;
  double scheduled_ms = 0, dispatched_ms = 0, sent_ms = 0;
  double finished_ms = 0;  // NaN for a request still in flight when the step ended
  double ttft_ms = 0, e2el_ms = 0;
  std::uint32_t input_tokens = 0, output_tokens = 0, chunks = 0;
  std::uint16_t turn = 0;  // a session's turn, 1-based (session: index / kMaxSessionTurns); 0: none
  Outcome outcome = Outcome::ok;
  // Inter-token latencies (ms): one per token gap, a chunk of k tokens giving k gaps of its
  // gap / k, as the step's ITL samples are made. Empty with fewer than two tokens.
  std::vector<float> itl_ms;
};

// How a step's sessions (workload.sessions) went: begun, answered to their last turn, cut (a
// turn was due after the step's end, its decision or a cancel: not sent), broken (a turn
// failed, and its user did not go on), and their turns sent.
struct SessionCounts {
  std::uint64_t started = 0, completed = 0, cut = 0, broken = 0, turns_sent = 0;
  llm::History history = llm::History::server;
  llm::SessionShape shape = llm::SessionShape::chat;
  void add(const SessionCounts& o) {
    started += o.started;
    completed += o.completed;
    cut += o.cut;
    broken += o.broken;
    turns_sent += o.turns_sent;
  }
};

// What a step did about the target's prefix cache (workload.prefix).
struct PrefixCacheState {
  llm::PrefixCache state = llm::PrefixCache::as_found;
  bool shared_prefixes = false;
  std::uint64_t warm_requests = 0, warm_failed = 0;
  double warm_s = 0;
};

// A step run by agents: each agent's share as it went, and what made the step invalid (an
// agent lost, late to its go, with too uncertain a clock or another schedule): an invalid
// step is stored and shown, never passed.
struct AgentShare {
  std::uint32_t index = 0;
  std::uint64_t epoch = 0;
  double offset_ms = 0, offset_error_ms = 0;  // its clock against capsweepd's, and the bound on the error
  std::uint64_t records = 0;                  // records it sent back
  std::uint64_t sent = 0, in_flight = 0;      // at its last heartbeat
  double lag_p99_ms = 0, late_go_ms = 0;
  double cpu_s = 0, loop_delay_p99_ms = 0, loop_delay_max_ms = 0;
  std::uint64_t peak_connections = 0;
  SessionCounts sessions;  // a step of sessions: its sessions
  bool done = false;       // it sent its last records
};
struct AgentsOutcome {
  std::uint32_t parts = 0;
  std::string run;
  std::vector<AgentShare> agents;
  std::optional<std::uint32_t> invalid_agent;
  std::string invalid;  // why the step is invalid ("" when valid)
  bool valid() const { return invalid.empty(); }
};

struct StepResult {
  std::vector<RequestRow> requests;  // every request of the step, in completion order
  StepMetrics metrics;
  bool generator_limited = false;
  double generator_cpu = 0;      // the busiest generator thread's CPU time / wall time
  double generator_cpu_s = 0;    // CPU seconds of every generator thread together
  double loop_delay_p99_ms = 0;  // event-loop delay of the generator
  double loop_delay_max_ms = 0;
  observe::ServerGauges server;
  BacklogTrend backlog;  // requests in flight on the client over the measured window
  bool cancelled = false;
  std::uint64_t peak_in_flight = 0;
  std::uint64_t peak_connections = 0;
  bool itl_lists_cut = false;  // past 16 Mi ITL values kept, later rows carry no ITL list
  // The engine parts (threads) the step ran on, each with the requests j ≡ part (mod parts);
  // the digest of the whole schedule every part held; each part's share of the concurrency
  // cap, ⌈cap / parts⌉ (0: none): with more than one part the cap holds per part, so the
  // step's own is approximate.
  std::uint32_t engine_parts = 1;
  std::uint64_t schedule_digest = 0;
  TraceId trace_id;  // the step's trace (its requests' traceparent), when it had one
  std::uint32_t concurrency_cap_per_part = 0;
  // The target's prefix cache as the step left it before its start: the workload's cache
  // state, and the warm-up's requests when it was warmed.
  PrefixCacheState prefix_cache;
  // A step of sessions (workload.sessions): how they went.
  std::optional<SessionCounts> sessions;
  // A step run by load agents: their shares and the step's validity.
  std::optional<AgentsOutcome> agents;
  // What ended the step; with spec.decide, the decision (if one was reached), the looks taken
  // and the confidence of each.
  StopReason stopped_by = StopReason::fixed_length;
  std::optional<Decision> decision;
  int looks = 0;
  double look_confidence = 0;
  // The summary of core's metrics (at `percentiles`) plus the generator's self-watch and the
  // server's gauges.
  nlohmann::json summary(const std::vector<double>& percentiles = kDefaultPercentiles) const;
};

// Whether the load generator, not the target, set a step's pace: its busiest thread's CPU
// share above spec.cpu_saturation, or its schedule lag p99 above spec.lag_bound, except in a
// burst (all at once): every request is due at time zero there, so its lag measures the
// burst's dispatch, not a late generator. The one rule of the engine's fold and the agents'.
bool generator_limited(const StepSpec& spec, double lag_p99_ms, double busiest_cpu_share) noexcept;

// The client's backlog (requests sent and not yet finished) over the measured window of a
// step's rows: its mean and trend, the saturation witness on the client's side.
BacklogTrend client_backlog(const std::vector<RequestRow>& requests, const StepMetrics& metrics);

struct Progress {
  std::atomic<std::uint64_t> scheduled{0};
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> in_flight{0};
  std::atomic<double> p95_ttft_ms{0};  // over measured requests finished so far (engine part 0's)
  // Requests in flight on each replica (target.base_urls) over every part: what
  // least_in_flight balances by.
  std::array<std::atomic<std::uint32_t>, llm::kMaxReplicas> replica_in_flight{};
  // A step begins: every count back to zero.
  void reset() noexcept {
    scheduled = sent = done = failed = in_flight = 0;
    p95_ttft_ms = 0;
    for (auto& n : replica_in_flight) n = 0;
  }
};

// What the manager holds of a run in progress, whatever it runs: its progress and a cancel
// that works from any thread.
class RunControl {
 public:
  virtual ~RunControl() = default;
  virtual void cancel() = 0;
  virtual const Progress& progress() const noexcept = 0;
};

// A step is split over engine parts by load: one part per kLoadPerEnginePart requests per
// second offered (rate mode), requests sent at once (all_at_once) or users (closed loop), up
// to spec.engine_threads. A step with a decision to take, live views or callbacks runs on one.
inline constexpr double kLoadPerEnginePart = 1000;
std::uint32_t engine_parts(const StepSpec& spec);

class StepRunner : public RunControl {
 public:
  // Requests go through `endpoint` (default: HTTP(S) to `target`); the target still names the
  // model and API for request bodies and limits the scraper.
  StepRunner(llm::Target target, std::shared_ptr<const llm::Workload> workload, EndpointFactory endpoint = {});
  ~StepRunner() override;

  // Runs the step to its end (blocking the caller); errors only for a bad spec.
  Result<StepResult> run(const StepSpec& spec);
  // The digest of the step's whole schedule as `parts` parts hold it (what each agent checks).
  Result<std::uint64_t> schedule_digest(const StepSpec& spec, std::uint32_t parts) const;
  // Stops dispatch and aborts requests in flight; run() then returns soon with cancelled set.
  void cancel() override;
  // The requests in flight now (a step with track_live): each one's scheduled time and, once
  // it came, its first token's. Read on the generator thread; empty when no step runs or the
  // generator does not answer within a second.
  struct Live {
    Nanos scheduled{0};
    std::optional<Nanos> first_token;
  };
  std::vector<Live> live_requests();
  const Progress& progress() const noexcept override { return progress_; }
  const llm::Workload& workload() const noexcept { return *workload_; }

 private:
  PrefixCacheState prepare_prefix_cache(const StepSpec& spec);
  // run() of a step whose load agents send (spec.agents): the same merge of raw records.
  Result<StepResult> run_on_agents(const StepSpec& spec);
  // What the agents' records of a step planned as `plan` are checked against.
  std::shared_ptr<const StepExpectation> expectation(const StepSpec& spec, const StepPlan& plan) const;
  llm::Target target_;
  std::shared_ptr<const llm::Workload> workload_;
  EndpointFactory endpoint_;
  Progress progress_;
  std::atomic<bool> cancel_requested_{false};
  std::mutex active_mutex_;    // guards active_ against the step's teardown
  std::vector<void*> active_;  // the running step's parts, for cancel()
};

}  // namespace capsweep::loadgen

#pragma once
// One engine part of a step, run on its own generator thread: its share of the step's one
// schedule (the requests j ≡ part mod parts), its own io_context, endpoint (connections),
// accumulator and self-watch. StepRunner (step_runner.cpp) makes the parts, runs each on a
// thread of its own and merges what they measured. Internal to loadgen.

#include <algorithm>
#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "loadgen/step_runner.hpp"
#include "observe/scraper.hpp"

namespace capsweep::llm {
struct NextTurn;
class SessionFlow;
}  // namespace capsweep::llm

namespace capsweep::loadgen {

namespace asio = boost::asio;

// What a step is before it runs: its send times, its measurement window and when the drain
// ends (step_runner.cpp).
struct StepPlan {
  Schedule schedule;
  StepWindow window;
  Nanos drain_deadline{0};
};
Result<StepPlan> plan_step(const StepSpec& spec, bool sessions);
// The salt of a step's schedule digest: the seed and the step's request indices.
std::uint64_t schedule_salt(const StepSpec& spec);

// The target's own gauges, scraped on a thread of its own from t0 (none when the step names
// no source). The scraper is not movable: it is made in place.
void start_scraper(std::optional<observe::Scraper>& scraper, const StepSpec& spec, const llm::Target& target,
                   SteadyClock::time_point t0);

// CPU seconds the calling thread has used.
double thread_cpu_seconds();

// A request's row for requests.csv (index, times in ms from the origin, outcome), with its
// ITL list when `with_itl`.
RequestRow request_row(const RequestRecord& rec, std::uint64_t index, bool with_itl);

// The rows a step keeps for requests.csv: each request's own ITL list while fewer than a
// budget of ITL values are kept (the step's 16 Mi, or a part's share of it), none after, and
// the step says so (its ITL percentiles are unaffected: they pool every gap).
struct RowKeeper {
  static constexpr std::size_t kMaxItlSamples = std::size_t{16} << 20;  // 64 MiB
  std::size_t kept = 0;                                                 // ITL values kept
  bool cut = false;                                                     // a row was kept without its list
  void keep(const RequestRecord& rec, std::uint64_t index, std::size_t budget, std::vector<RequestRow>& rows);
};

// Sorts a step's records (or rows) in completion order: by `end` (a request that never
// finished ends at +infinity: last), by index at a tie. The local parts' merge and the
// agents' fold order alike.
template <class T, class End>
void completion_order(std::vector<T>& v, End end) {
  std::stable_sort(v.begin(), v.end(), [&end](const T& a, const T& b) {
    const auto x = end(a), y = end(b);
    return x < y || (x == y && a.index < b.index);
  });
}

// Every co_spawn of the engine completes through this.
inline constexpr auto log_exception = [](std::exception_ptr e) { log_escaped("loadgen: request coroutine failed", e); };

// What one generator of a step says of itself beside its records: an engine part here, or a
// load agent (its done-summary). The step's fold adds them up the same way for both.
struct GeneratorShare {
  double cpu_s = 0;  // its thread's (an agent's engine threads') CPU seconds
  double loop_delay_p99_ms = 0, loop_delay_max_ms = 0;
  double lag_p99_ms = 0;  // its own schedule lag p99 when its records do not carry it (0: they do)
  std::uint64_t peak_connections = 0;
  SessionCounts sessions;
};

// What one engine part measured (or, for a step on agents, their records folded into one
// accumulator), taken once its io_context stopped; fold_step makes the step of them.
struct PartResult {
  std::optional<StepAccumulator> acc;
  std::vector<RequestRow> rows;
  bool itl_lists_cut = false, cancelled = false;
  StopReason stopped_by = StopReason::fixed_length;
  std::optional<Decision> decision;
  int looks = 0;
  double look_confidence = 0;
  GeneratorShare self;  // a local part's own watch (unused for the agents' records)
};

// The one fold of a step, local or on agents: the parts' accumulators as one (exact: the same
// samples) and their rows in completion order; the generators' shares added up (CPU seconds,
// connections and sessions summed, loop delay and lag at the worst generator, the busiest
// one's share of a core over wall_s); the backlog trend, and generator-limited decided once.
void fold_step(std::vector<PartResult>& parts, const std::vector<GeneratorShare>& shares, double wall_s,
               const StepSpec& spec, const std::optional<llm::SessionSpec>& sessions, StepResult& result);

// The concurrency cap each of `parts` generators holds (0: none).
inline std::uint32_t cap_per_part(const StepSpec& spec, std::uint32_t parts) {
  return spec.concurrency == 0 || parts == 0 ? 0 : (spec.concurrency + parts - 1) / parts;
}

// The names of a target's models (target.models), for each model's metrics; none for one model.
std::vector<std::string> model_names(const llm::Target& t);

// Everything one engine part of a step needs on its generator thread: its share of the
// schedule (the indices j ≡ part mod parts), its own io_context, connections and accumulator.
// Only the progress counters and the peak of requests in flight are shared between parts.
struct EnginePart {
  EnginePart(const llm::Target& t, const EndpointFactory& make_endpoint, const llm::Workload& w, const StepSpec& s,
             Progress& p, StepWindow window, std::atomic<std::uint64_t>& peak)
      : endpoint(make_endpoint(io)),
        target(t),
        workload(w),
        spec(s),
        progress(p),
        peak_total(peak),
        acc(window, s.goodput, s.exact_samples),
        dispatch_timer(io),
        drained(io),
        monitor_timer(io) {
    acc.split_by_model(model_names(t));
    acc.split_by_replica(t.replica_urls());
  }

  asio::io_context io{1};
  std::unique_ptr<Endpoint> endpoint;
  const llm::Target& target;
  const llm::Workload& workload;
  const StepSpec& spec;
  Progress& progress;
  std::atomic<std::uint64_t>& peak_total;  // requests in flight over every part, at its highest
  StepAccumulator acc;
  SchedulePart share;            // rate mode: this part's requests
  std::uint32_t cap = 0;         // rate mode: this part's share of the concurrency cap (0 = none)
  std::uint64_t next_local = 0;  // closed loop: this part's requests begun
  SteadyClock::time_point t0;
  asio::steady_timer dispatch_timer, drained, monitor_timer;
  struct Waiting {
    std::uint64_t index;
    Nanos scheduled, dispatched;
  };
  std::deque<Waiting> capped;  // rate mode with a concurrency cap: dispatched, waiting for a slot
  std::uint64_t in_flight = 0, peak_in_flight = 0, peak_connections = 0;
  bool stopping = false;    // no more dispatch (end of schedule, drain, cancel)
  bool abandoning = false;  // the drain timeout passed: requests still running are incomplete
  bool cancelled = false;   // cancelled by the user
  SampleSet loop_delay_ms;
  std::vector<RequestRow> rows;
  RowKeeper keeper;                                              // this part's share of the step's ITL lists in rows
  std::unordered_map<std::uint64_t, const RequestRecord*> live;  // spec.track_live: in flight
  Nanos drain_deadline{0};  // from t0; a decided step moves it to its decision + the drain timeout

  // spec.decide: the decider, and what it needs of the generator's own state.
  std::optional<StepDecider> decider;
  std::optional<Decision> decision;
  std::uint64_t measured_pending = 0;  // measured requests dispatched and not ended
  std::uint64_t measured_dispatched = 0, measured_lagging = 0;
  double cpu_at_start = 0;

  // Whether the generator, not the target, sets the pace now: its schedule lag p99 (more than
  // 1% of the measured requests late by over the bound) or its CPU share, as the step's own
  // generator_limited judges at its end.
  bool generator_behind() const;

  // spec.decide: feeds an ended request to the decider and, at a look that decides, ends
  // dispatch and the measured window there.
  void consider_stopping(const RequestRecord& rec);
  // Keeps the request's row for requests.csv (spec.keep_rows), with its ITL list while the
  // step's cap of them allows; hands the record to spec.on_record (an agent's).
  void record_row(const RequestRecord& rec, std::uint64_t index);
  // The name a request of `model` (its index in target.models) asks for ("": the target's model).
  std::string_view model_name(std::uint16_t model) const;
  // The replica request (or session) `unit` goes to (target.base_urls; 0 for one): unit mod n
  // (round_robin), or the one with the fewest requests in flight over every part, ties going
  // to the first from unit mod n (least_in_flight).
  std::uint16_t pick_replica(std::uint64_t unit) const;
  Nanos now() const { return SteadyClock::now() - t0; }

  // The closed loop's next request index of this part: part, part + parts, part + 2 parts …
  std::uint64_t next_index() const { return share.part + next_local * share.parts; }

  // A request taken up: counted in flight here and over every part.
  void enter();
  // Takes up request `index` now: counted in flight, its coroutine spawned (a session's first
  // turn: the session's).
  void launch(std::uint64_t index, Nanos scheduled, Nanos dispatched);
  // Builds a request's body (`build` may throw) and sends it. A failure of our own (an
  // exception while building or sending it, e.g. bad_alloc) ends it as client_error.
  asio::awaitable<void> exchange(std::uint64_t index, RequestRecord& rec, const std::function<std::string()>& build);
  // One request, settled exactly once whatever happens: a failure of our own (an exception
  // while building or sending it, e.g. bad_alloc) ends it as client_error, so the count of
  // requests in flight always returns to zero and the drain cannot wait forever.
  asio::awaitable<void> one(std::uint64_t index, Nanos scheduled, Nanos dispatched);
  bool client_error_logged = false;

  // Settles an ended request: its row, the accumulator, the decider, progress; a slot freed
  // lets the oldest request waiting behind the cap go.
  void finish(RequestRecord& rec, std::uint64_t index);
  // Rate mode: takes up this part's requests at their scheduled times (behind the cap, if any).
  asio::awaitable<void> dispatch_rate();
  // One closed-loop user: sends, waits for the answer (and its think time), sends again.
  asio::awaitable<void> worker(Nanos end, std::uint32_t user);

  // Sessions (workload.sessions; engine_session.cpp). Session `s` arrives at `arrival` (its
  // first turn's schedule; the generator took it up at `dispatched`) and sends its turns in
  // order, each a think time after the answer before it, with the conversation so far. Turn k
  // of session s is request s * kMaxSessionTurns + k - 1.
  // The turns follow one another as the session shape's flow (llm/session_shapes.hpp) says.
  asio::awaitable<void> session(std::uint64_t s, Nanos arrival, Nanos dispatched);
  // One turn of a session, request `index`, its k-th (from 0), sent with the flow's
  // conversation and settled: its output tokens when answered, nullopt when it failed.
  // `events` keeps its stream where the flow reads it.
  // When the turn was due and taken up, and the replica the session talks to.
  struct TurnPlan {
    Nanos due, dispatched;
    std::uint16_t replica = 0;
  };
  asio::awaitable<std::optional<std::uint32_t>> send_turn(std::uint64_t index, std::uint32_t k,
                                                          const llm::NextTurn& turn, const llm::SessionFlow& flow,
                                                          TurnPlan plan, std::vector<std::string>& events);
  // Rate mode: counts session `s` open and spawns it. With a concurrency cap, the cap holds
  // the sessions open: one past it waits (`capped`) for a session to end.
  void start_session(std::uint64_t s, Nanos arrival, Nanos dispatched);
  // A session ended (`answered`: every turn was): counted, and the oldest one waiting behind
  // the cap begins.
  void end_session(bool answered);
  // One closed-loop user of sessions: a session, then the next at once, to the step's end.
  asio::awaitable<void> session_user(Nanos end);
  // Whether a session's turn due at `due` (from t0) is still sent: not after the step's end,
  // its decision, a cancel or the drain's end.
  bool turn_may_go(Nanos due) const;
  // Waits until `due` in short slices (a step's end or a cancel is noticed at once); false
  // when the turn may no longer go.
  asio::awaitable<bool> wait_for_turn(Nanos due);
  std::uint64_t sessions_open = 0;  // sessions begun and not ended (a turn in flight or a think time)
  SessionCounts session_counts;

  // The self-watch: event-loop delay every 5 ms, and the live p95 TTFT for progress.
  asio::awaitable<void> monitor();
  // Live p95 TTFT for progress: a histogram-only sample set (no sorting on the generator
  // thread, values within 1%), fed with measured successful requests.
  SampleSet live_ttft_ms{0};

  // The part's whole run: dispatch (or the closed loop's users), then the drain, then the
  // abandonment of what is left.
  asio::awaitable<void> main();
  // Moves what this part measured into `out` once its io_context has stopped.
  void take_result(PartResult& out);

  static constexpr Nanos kSettleBound = std::chrono::seconds(3);
  bool unsettled = false;  // requests never settled: io stopped, state must not be freed

  // Settles every request (or session) still waiting behind the cap, which never went out,
  // with `outcome`.
  void settle_waiting(Outcome outcome);

  // The user's cancel: no more dispatch, waiting requests settled as cancelled, the rest aborted.
  void cancel();
};

}  // namespace capsweep::loadgen

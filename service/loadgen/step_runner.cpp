#include "loadgen/step_runner.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <unordered_map>

#include "core/log.hpp"
#include "llm/client.hpp"
#include "loadgen/endpoint.hpp"
#include "observe/scraper.hpp"

namespace capsweep::loadgen {

namespace asio = boost::asio;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

namespace {

double thread_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Every co_spawn here completes through this.
constexpr auto log_exception = [](std::exception_ptr e) { log_escaped("loadgen: request coroutine failed", e); };

}  // namespace

// What one engine part measured, taken on its own thread once its io_context stopped, and
// merged with the other parts' by StepRunner::run.
struct PartResult {
  std::optional<StepAccumulator> acc;
  std::vector<RequestRow> rows;
  SampleSet loop_delay_ms;
  std::uint64_t peak_connections = 0;
  bool itl_lists_cut = false, cancelled = false;
  double cpu_s = 0;
  StopReason stopped_by = StopReason::fixed_length;
  std::optional<Decision> decision;
  int looks = 0;
  double look_confidence = 0;
};

// Everything one engine part of a step needs on its generator thread: its share of the
// schedule (the indices j ≡ part mod parts), its own io_context, connections and accumulator.
// Only the progress counters and the peak of requests in flight are shared between parts.
struct StepState {
  StepState(const llm::Target& t, const EndpointFactory& make_endpoint, const llm::Workload& w, const StepSpec& s,
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
        monitor_timer(io) {}

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
  static constexpr std::size_t kMaxRowItlSamples = std::size_t{16} << 20;  // over all parts
  std::size_t row_itl_samples = 0;
  bool itl_lists_cut = false;  // some rows carry no ITL list: the step kept its cap of them
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
  bool generator_behind() const {
    if (measured_lagging * 100 > measured_dispatched) return true;
    const double wall = to_s(now());
    return wall > 1 && (thread_cpu_seconds() - cpu_at_start) / wall > spec.cpu_saturation;
  }

  void consider_stopping(const RequestRecord& rec) {
    decider->add(rec);
    if (stopping || !decider->look_due(now())) return;
    auto d = decider->look(now(), measured_pending, generator_behind());
    if (!d) return;
    // Decided: no more dispatch; the measured window ends here and the drain runs from here.
    decision = std::move(d);
    stopping = true;
    dispatch_timer.cancel();
    drain_deadline = decision->at + spec.drain_timeout;
    acc.end_window(decision->at, drain_deadline);
  }

  void record_row(const RequestRecord& rec, std::uint64_t index) {
    if (!spec.keep_rows) return;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    RequestRow row;
    row.index = index;
    row.scheduled_ms = to_ms(rec.scheduled);
    row.dispatched_ms = to_ms(rec.dispatched);
    row.sent_ms = to_ms(rec.sent);
    row.finished_ms = rec.outcome == Outcome::incomplete ? nan : to_ms(rec.finished);
    row.ttft_ms = rec.chunks.empty() ? nan : to_ms(*rec.first_token() - rec.scheduled);
    row.e2el_ms = rec.outcome == Outcome::ok && !rec.chunks.empty() ? to_ms(*rec.last_token() - rec.scheduled) : nan;
    row.input_tokens = rec.input_tokens;
    row.output_tokens = rec.output_tokens;
    row.chunks = static_cast<std::uint32_t>(rec.chunks.size());
    row.outcome = rec.outcome;
    // Each request's own ITL list, until the step has kept kMaxRowItlSamples of them (64 MiB):
    // past that, rows carry none and the summary says so (the step's ITL percentiles are
    // unaffected: they pool every gap).
    if (rec.outcome == Outcome::ok && rec.chunks.size() > 1) {
      if (row_itl_samples < kMaxRowItlSamples / share.parts) {
        for_each_token_gap_ms(rec, [&row](double gap) { row.itl_ms.push_back(static_cast<float>(gap)); });
        row_itl_samples += row.itl_ms.size();
      } else {
        itl_lists_cut = true;
      }
    }
    rows.push_back(std::move(row));
  }

  Nanos now() const { return SteadyClock::now() - t0; }

  // The closed loop's next request index of this part: part, part + parts, part + 2 parts …
  std::uint64_t next_index() const { return share.part + next_local * share.parts; }

  // A request taken up: counted in flight here and over every part.
  void enter() {
    ++in_flight;
    peak_in_flight = std::max(peak_in_flight, in_flight);
    const std::uint64_t total = progress.in_flight.fetch_add(1, std::memory_order_relaxed) + 1;
    std::uint64_t seen = peak_total.load(std::memory_order_relaxed);
    while (total > seen && !peak_total.compare_exchange_weak(seen, total, std::memory_order_relaxed)) {
    }
  }

  void launch(std::uint64_t index, Nanos scheduled, Nanos dispatched) {
    enter();
    asio::co_spawn(io, one(index, scheduled, dispatched), log_exception);
  }

  // One request, settled exactly once whatever happens: a failure of our own (an exception
  // while building or sending it, e.g. bad_alloc) ends it as client_error, so the count of
  // requests in flight always returns to zero and the drain cannot wait forever.
  asio::awaitable<void> one(std::uint64_t index, Nanos scheduled, Nanos dispatched) {
    RequestRecord rec;
    rec.scheduled = scheduled;
    rec.dispatched = dispatched;
    if (spec.track_live) live[index] = &rec;
    try {
      const llm::WorkItem item = workload.item(spec.request_index_base + index);
      rec.input_tokens = item.input_tokens;
      if (item.abandon_without_first_token) rec.abandon_at = scheduled + *item.abandon_without_first_token;
      rec.abandon_after_tokens = item.abandon_after_tokens;
      rec.chunks.reserve(std::min<std::uint32_t>(item.max_tokens, 4096));  // no regrowth on typical answers
      std::string body = llm::completion_body(target, item.prompt, item.max_tokens, item.messages);
      progress.sent.fetch_add(1, std::memory_order_relaxed);
      if (spec.fail_request && *spec.fail_request == index)
        throw std::runtime_error("test hook: request failed in the generator");
      co_await endpoint->send(std::move(body), rec, t0, fmt::format("capsweep-{}-{}", spec.seed, index));
      peak_connections = std::max<std::uint64_t>(peak_connections, endpoint->open_connections());
    } catch (const std::exception& e) {
      rec.outcome = Outcome::client_error;
      rec.chunks.clear();
      if (!client_error_logged) {
        client_error_logged = true;
        log::error(fmt::format("loadgen: request {} failed in the generator: {}", index, e.what()));
      }
    }
    finish(rec, index);
  }
  bool client_error_logged = false;

  void finish(RequestRecord& rec, std::uint64_t index) {
    if (rec.outcome == Outcome::cancelled && abandoning && !cancelled) rec.outcome = Outcome::incomplete;
    if (spec.track_live) live.erase(index);
    record_row(rec, index);
    if (spec.on_ended) spec.on_ended(rec);
    if (rec.outcome == Outcome::ok && !rec.chunks.empty() && rec.scheduled >= spec.warmup) {
      live_ttft_ms.add(to_ms(*rec.first_token() - rec.scheduled));
    }
    acc.add(rec);
    if (rec.scheduled >= spec.warmup && measured_pending > 0) --measured_pending;
    if (decider) consider_stopping(rec);
    (rec.outcome == Outcome::ok ? progress.done : progress.failed).fetch_add(1, std::memory_order_relaxed);
    --in_flight;
    progress.in_flight.fetch_sub(1, std::memory_order_relaxed);
    // A slot freed: the oldest request waiting behind the concurrency cap goes now.
    if (!capped.empty() && !abandoning && !cancelled) {
      const Waiting w = capped.front();
      capped.pop_front();
      launch(w.index, w.scheduled, w.dispatched);
    }
    if (in_flight == 0) drained.cancel();
  }

  asio::awaitable<void> dispatch_rate() {
    const auto& times = share.send_times;
    for (std::size_t k = 0; k < times.size() && !stopping; ++k) {
      const std::uint64_t i = share.indices[k];
      const auto due = t0 + times[k];
      if (SteadyClock::now() < due) {
        dispatch_timer.expires_at(due);
        co_await dispatch_timer.async_wait(use_tuple);
        if (stopping) break;
      }
      if (spec.stall_before && *spec.stall_before == i) std::this_thread::sleep_for(spec.stall);
      const Nanos dispatched = now();
      progress.scheduled.fetch_add(1, std::memory_order_relaxed);
      if (spec.on_scheduled) spec.on_scheduled(times[k]);
      if (times[k] >= spec.warmup) {
        ++measured_pending;
        ++measured_dispatched;
        if (dispatched - times[k] > spec.lag_bound) ++measured_lagging;
      }
      if (cap > 0 && in_flight >= cap) {
        capped.push_back({i, times[k], dispatched});
      } else {
        launch(i, times[k], dispatched);
      }
    }
  }

  // One closed-loop user: sends, waits for the answer (and its think time), sends again.
  asio::awaitable<void> worker(Nanos end, std::uint32_t user) {
    Rng think_rng(spec.seed * 0x9E3779B97F4A7C15ULL + user + 1);
    asio::steady_timer think_timer(io);
    while (!stopping && now() < end && (!spec.requests || next_index() < *spec.requests)) {
      const std::uint64_t i = next_index();
      ++next_local;
      const Nanos t = now();
      progress.scheduled.fetch_add(1, std::memory_order_relaxed);
      enter();
      co_await one(i, t, t);
      if (spec.think_time_ms && !stopping) {
        // Waited in short slices, so that the step's end or a cancel is noticed at once.
        const auto until = SteadyClock::now() + std::chrono::milliseconds(spec.think_time_ms->sample(think_rng));
        while (!stopping && now() < end && SteadyClock::now() < until) {
          think_timer.expires_at(std::min(until, SteadyClock::now() + std::chrono::milliseconds(20)));
          co_await think_timer.async_wait(use_tuple);
        }
      }
    }
  }

  asio::awaitable<void> monitor() {
    // Event-loop delay: how late a 5 ms timer fires; and the live p95 TTFT.
    auto next = SteadyClock::now();
    int ticks = 0;
    while (!stopping || in_flight > 0) {
      next += std::chrono::milliseconds(5);
      monitor_timer.expires_at(next);
      co_await monitor_timer.async_wait(use_tuple);
      const auto late = SteadyClock::now() - next;
      loop_delay_ms.add(std::chrono::duration<double, std::milli>(late).count());
      if (late > std::chrono::milliseconds(50)) next = SteadyClock::now();
      if (++ticks % 50 == 0 && share.part == 0)
        progress.p95_ttft_ms.store(live_ttft_ms.percentile(95), std::memory_order_relaxed);
    }
  }

  // Live p95 TTFT for progress: a histogram-only sample set (no sorting on the generator
  // thread, values within 1%), fed with measured successful requests.
  SampleSet live_ttft_ms{0};

  asio::awaitable<void> main() {
    cpu_at_start = thread_cpu_seconds();
    asio::co_spawn(io, monitor(), log_exception);
    if (spec.mode == Mode::rate) {
      co_await dispatch_rate();
    } else {
      // N closed-loop workers. A timed step ends at its duration whatever is in flight (the
      // drain below applies); a counted one when every request was sent.
      const Nanos end = spec.requests ? Nanos::max() / 2 : spec.duration;
      // Workers start at the origin, as a schedule's first request would.
      dispatch_timer.expires_at(t0);
      co_await dispatch_timer.async_wait(use_tuple);
      // This part's users: u ≡ part (mod parts).
      for (std::uint32_t w = share.part; w < spec.concurrency; w += share.parts)
        asio::co_spawn(io, worker(end, w), log_exception);
      while (!stopping && (spec.requests ? next_index() < *spec.requests : now() < end)) {
        dispatch_timer.expires_at(spec.requests ? SteadyClock::now() + std::chrono::milliseconds(5) : t0 + end);
        co_await dispatch_timer.async_wait(use_tuple);
      }
    }
    stopping = true;
    // Drain: wait for the requests in flight until the drain deadline.
    if (in_flight > 0 || !capped.empty()) {
      drained.expires_at(t0 + drain_deadline);
      co_await drained.async_wait(use_tuple);
    }
    if (in_flight > 0 || !capped.empty()) {
      abandoning = true;
      // Requests still waiting behind the cap never went out: incomplete all the same.
      for (const auto& w : capped) {
        RequestRecord rec;
        rec.scheduled = w.scheduled;
        rec.dispatched = rec.sent = w.dispatched;
        rec.outcome = cancelled ? Outcome::cancelled : Outcome::incomplete;
        record_row(rec, w.index);
        acc.add(rec);
        if (spec.on_ended) spec.on_ended(rec);
      }
      capped.clear();
      endpoint->cancel_all();
      // Aborted requests settle at once; should one not (a bug, never a target's doing), the
      // step still ends: its state is then left alone rather than freed under it.
      const auto give_up = SteadyClock::now() + kSettleBound;
      while (in_flight > 0 && SteadyClock::now() < give_up) {
        drained.expires_after(std::chrono::milliseconds(5));
        co_await drained.async_wait(use_tuple);
      }
      if (in_flight > 0) {
        unsettled = true;
        log::error(
            fmt::format("loadgen: {} requests did not settle {} s after being aborted; the step ends without them",
                        in_flight, std::chrono::duration_cast<std::chrono::seconds>(kSettleBound).count()));
        io.stop();
        co_return;
      }
    }
    monitor_timer.cancel();
  }
  // Moves what this part measured into `out` once its io_context has stopped.
  void take_result(PartResult& out) {
    out.loop_delay_ms = std::move(loop_delay_ms);
    out.peak_connections = peak_connections;
    out.itl_lists_cut = itl_lists_cut;
    out.cancelled = cancelled;
    if (decider) {
      out.decision = decision;
      out.stopped_by = decision ? StopReason::decided : StopReason::max_length;
      out.looks = decider->looks_taken();
      out.look_confidence = decider->look_confidence();
    }
    out.acc.emplace(std::move(acc));
    out.rows = std::move(rows);
  }

  static constexpr Nanos kSettleBound = std::chrono::seconds(3);
  bool unsettled = false;  // requests never settled: io stopped, state must not be freed

  void cancel() {
    cancelled = true;
    stopping = true;
    dispatch_timer.cancel();
    abandoning = true;
    for (const auto& w : capped) {
      RequestRecord rec;
      rec.scheduled = w.scheduled;
      rec.dispatched = rec.sent = w.dispatched;
      rec.outcome = Outcome::cancelled;
      record_row(rec, w.index);
      acc.add(rec);
      if (spec.on_ended) spec.on_ended(rec);
    }
    capped.clear();
    endpoint->cancel_all();
    drained.cancel();
  }
};

StepRunner::StepRunner(llm::Target target, std::shared_ptr<const llm::Workload> workload, EndpointFactory endpoint)
    : target_(std::move(target)),
      workload_(std::move(workload)),
      endpoint_(endpoint ? std::move(endpoint) : http_endpoint(target_)) {}

StepRunner::~StepRunner() = default;

void StepRunner::cancel() {
  cancel_requested_ = true;
  std::lock_guard lock(active_mutex_);
  for (void* part : active_) {
    auto* s = static_cast<StepState*>(part);
    asio::post(s->io, [s] { s->cancel(); });
  }
}

std::vector<StepRunner::Live> StepRunner::live_requests() {
  // Shared with the handler: should the generator answer after we gave up, it sets a promise
  // nobody reads any more.
  auto answer = std::make_shared<std::promise<std::vector<Live>>>();
  auto future = answer->get_future();
  {
    std::lock_guard lock(active_mutex_);
    // A step with track_live runs on one engine part (engine_parts).
    auto* s = active_.size() == 1 ? static_cast<StepState*>(active_.front()) : nullptr;
    if (!s || !s->spec.track_live) return {};
    asio::post(s->io, [s, answer] {
      std::vector<Live> out;
      out.reserve(s->live.size());
      for (const auto& [index, rec] : s->live) out.push_back({rec->scheduled, rec->first_token()});
      answer->set_value(std::move(out));
    });
  }
  // The generator answers between two events; a stopped one never does.
  if (future.wait_for(std::chrono::seconds(1)) != std::future_status::ready) return {};
  return future.get();
}

namespace {

// What a step is before it runs: its send times, its measurement window and when the drain
// ends.
struct StepPlan {
  Schedule schedule;
  StepWindow window;
  Nanos drain_deadline{0};
};

Result<StepPlan> plan_step(const StepSpec& spec) {
  if (spec.mode == Mode::concurrency && spec.concurrency == 0) {
    return invalid("/concurrency", "concurrency mode needs a concurrency of at least 1");
  }
  if (spec.warmup >= spec.duration && !spec.requests) {
    return invalid("/warmup_s", "the warm-up must be shorter than the step");
  }
  StepPlan plan;
  plan.window.warmup = spec.warmup;
  Nanos schedule_end = spec.duration;
  if (spec.mode == Mode::rate && spec.schedule) {
    plan.schedule = *spec.schedule;
    plan.window.offered_rate_rps = spec.schedule->spec.rate_rps;
    plan.window.end = spec.duration;
  } else if (spec.mode == Mode::rate) {
    ScheduleLimit limit;
    if (spec.arrival.process != ArrivalProcess::all_at_once) limit.duration = spec.duration;
    limit.count = spec.requests;
    auto s = make_schedule(spec.arrival, limit, spec.seed);
    if (!s) return s.error();
    plan.schedule = std::move(*s);
    plan.window.offered_rate_rps = spec.arrival.process == ArrivalProcess::all_at_once
                                       ? std::numeric_limits<double>::infinity()
                                       : spec.arrival.rate_rps;
    if (spec.requests) {
      // A count-limited step ends with its last answer, not at a fixed time.
      schedule_end = plan.schedule.send_times.empty() ? Nanos(0) : plan.schedule.send_times.back();
    } else {
      plan.window.end = spec.duration;
    }
  } else if (!spec.requests) {
    plan.window.end = spec.duration;
  }
  plan.drain_deadline = std::max(schedule_end, spec.duration) + spec.drain_timeout;
  plan.window.drain_end = plan.drain_deadline;
  return plan;
}

// glibc shrinks the top of a thread's own arena only when a large block (64 KiB or more) is
// freed into it; malloc_trim does not reach those tops. A step's many small frees leave the
// top at its high-water mark: one large block taken and freed hands it back now.
void trim_thread_arena() {
#if defined(__GLIBC__)
  void* block = std::malloc(192 * 1024);                            // below the mmap threshold: from this arena
  if (block != nullptr) static_cast<volatile char*>(block)[0] = 0;  // not elided as unused
  std::free(block);
#endif
}

// The target's own gauges, scraped on a thread of its own (none when the step names no
// source). The scraper is not movable: it is made in place.
void start_scraper(std::optional<observe::Scraper>& scraper, const StepSpec& spec, const llm::Target& target,
                   SteadyClock::time_point t0) {
  if (spec.prometheus) {
    scraper.emplace(*spec.prometheus, target, spec.scrape_interval, t0);
  } else if (!spec.metrics_url.empty()) {
    scraper.emplace(spec.metrics_url, target, spec.scrape_interval, t0);
  }
  if (scraper) scraper->start();
}

}  // namespace

namespace {

// Runs one part on the calling thread (its generator thread) and takes what it measured; once
// its io_context stopped, `detach` unregisters it from cancel(). The part's state is freed here, so that its memory
// goes back to this thread's arena and the arena's top can be handed back at once.
template <class Detach>
void run_part(std::unique_ptr<StepState> state, PartResult& out, Detach detach) {
  const double cpu0 = thread_cpu_seconds();
  asio::co_spawn(state->io, state->main(), log_exception);
  if (state->cancelled) asio::post(state->io, [s = state.get()] { s->cancel(); });
  state->io.run();
  out.cpu_s = thread_cpu_seconds() - cpu0;
  detach(state.get());
  state->take_result(out);
  if (state->unsettled) {
    // Coroutines still reference the state; leaking it is bounded, freeing it is not safe.
    static_cast<void>(state.release());
  }
  state.reset();
  trim_thread_arena();
}

// The parts' records merged into one step: the accumulators as one (exact: the same samples),
// the rows in completion order, the generator's self-watch at its worst part.
void merge_parts(std::vector<PartResult>& parts, double wall_s, StepResult& result) {
  PartResult& first = parts.front();
  for (const PartResult& part : parts) result.generator_cpu_s += part.cpu_s;
  for (std::size_t p = 1; p < parts.size(); ++p) {
    PartResult& other = parts[p];
    first.acc->merge(std::move(*other.acc));
    first.loop_delay_ms.merge(other.loop_delay_ms);
    first.rows.insert(first.rows.end(), std::make_move_iterator(other.rows.begin()),
                      std::make_move_iterator(other.rows.end()));
    first.peak_connections += other.peak_connections;
    first.itl_lists_cut = first.itl_lists_cut || other.itl_lists_cut;
    first.cancelled = first.cancelled || other.cancelled;
    first.cpu_s = std::max(first.cpu_s, other.cpu_s);
  }
  if (parts.size() > 1) {
    // Completion order over all parts; requests that never finished last, by index.
    const auto key = [](const RequestRow& r) {
      return std::isnan(r.finished_ms) ? std::numeric_limits<double>::infinity() : r.finished_ms;
    };
    std::stable_sort(first.rows.begin(), first.rows.end(), [&key](const RequestRow& a, const RequestRow& b) {
      return key(a) < key(b) || (key(a) == key(b) && a.index < b.index);
    });
  }
  result.loop_delay_p99_ms = first.loop_delay_ms.percentile(99);
  result.loop_delay_max_ms = first.loop_delay_ms.max();
  result.peak_connections = first.peak_connections;
  result.itl_lists_cut = first.itl_lists_cut;
  result.cancelled = first.cancelled;
  result.stopped_by = first.stopped_by;
  result.decision = first.decision;
  result.looks = first.looks;
  result.look_confidence = first.look_confidence;
  result.generator_cpu = wall_s > 0 ? first.cpu_s / wall_s : 0;  // the busiest part's share of a core
  result.metrics = std::move(*first.acc).finish();
  result.requests = std::move(first.rows);
}

// The step's engine parts, each holding its share of the one schedule (engine_parts of them).
Result<std::vector<std::unique_ptr<StepState>>> make_parts(const StepSpec& spec, const StepPlan& plan,
                                                           const llm::Target& target, const EndpointFactory& endpoint,
                                                           const llm::Workload& workload, Progress& progress,
                                                           std::atomic<std::uint64_t>& peak_in_flight) {
  const std::uint32_t parts = engine_parts(spec);
  const std::uint64_t salt = spec.seed * 0x9E3779B97F4A7C15ULL ^ spec.request_index_base;
  std::vector<std::unique_ptr<StepState>> states;
  for (std::uint32_t p = 0; p < parts; ++p) {
    auto state = std::make_unique<StepState>(target, endpoint, workload, spec, progress, plan.window, peak_in_flight);
    state->share = split_schedule(plan.schedule, p, parts, salt);
    state->cap = spec.concurrency == 0 ? 0 : (spec.concurrency + parts - 1) / parts;
    state->drain_deadline = plan.drain_deadline;
    states.push_back(std::move(state));
  }
  // Every part must hold a share of one schedule: parts that disagree are not one step.
  for (const auto& st : states) {
    if (st->share.digest != states.front()->share.digest) {
      return Error{errc::internal, "the engine parts disagree on the step's schedule digest", ""};
    }
  }
  return states;
}

}  // namespace

std::uint32_t engine_parts(const StepSpec& spec) {
  const std::uint32_t most = std::max<std::uint32_t>(spec.engine_threads, 1);
  // What sees every request as it happens (a decision, live views, callbacks) runs on one part.
  if (most == 1 || spec.decide || spec.track_live || spec.on_scheduled || spec.on_ended) return 1;
  double load = 0;  // requests per second, or in flight at once
  if (spec.mode == Mode::concurrency) {
    load = spec.concurrency;
  } else if (spec.schedule) {
    load = spec.schedule->spec.rate_rps;
  } else if (spec.arrival.process == ArrivalProcess::all_at_once) {
    load = static_cast<double>(spec.requests.value_or(0));
  } else {
    load = spec.arrival.rate_rps;
  }
  if (!(load > 0)) return 1;
  auto parts = static_cast<std::uint32_t>(std::min<double>(most, std::ceil(load / kLoadPerEnginePart)));
  if (spec.mode == Mode::concurrency) parts = std::min(parts, spec.concurrency);  // every part has a user
  return std::max<std::uint32_t>(parts, 1);
}

Result<StepResult> StepRunner::run(const StepSpec& spec) {
  auto plan = plan_step(spec);
  if (!plan) return plan.error();
  std::atomic<std::uint64_t> peak_in_flight{0};
  auto made = make_parts(spec, *plan, target_, endpoint_, *workload_, progress_, peak_in_flight);
  if (!made) return made.error();
  std::vector<std::unique_ptr<StepState>> states = std::move(*made);
  const auto parts = static_cast<std::uint32_t>(states.size());
  if (spec.decide && spec.mode == Mode::rate && !spec.requests) {
    auto& s0 = *states.front();
    s0.decider.emplace(spec.decide->slo, spec.warmup, spec.decide->settings);
    if (!s0.decider->can_decide()) s0.decider.reset();  // nothing to decide: the fixed length
  }
  progress_.scheduled = progress_.sent = progress_.done = progress_.failed = progress_.in_flight = 0;
  progress_.p95_ttft_ms = 0;
  const bool cancelled_before = cancel_requested_.exchange(false);  // cancelled before it began
  {
    std::lock_guard lock(active_mutex_);
    for (const auto& st : states) {
      active_.push_back(st.get());
      if (cancelled_before) st->cancelled = true;
    }
  }

  StepResult result;
  result.engine_parts = parts;
  result.schedule_digest = states.front()->share.digest;
  result.concurrency_cap_per_part = states.front()->cap;
  const auto t0 = SteadyClock::now() + std::chrono::milliseconds(20);
  for (const auto& st : states) st->t0 = t0;
  std::optional<observe::Scraper> scraper;
  start_scraper(scraper, spec, target_, t0);
  const auto wall_start = SteadyClock::now();
  std::vector<PartResult> measured(parts);
  std::vector<std::thread> generators;
  for (std::uint32_t p = 0; p < parts; ++p) {
    generators.emplace_back([this, &measured, p, state = std::move(states[p])]() mutable {
      run_part(std::move(state), measured[p], [this](StepState* s) {
        std::lock_guard lock(active_mutex_);
        std::erase(active_, static_cast<void*>(s));
      });
    });
  }
  for (auto& g : generators) g.join();
  const double wall = std::chrono::duration<double>(SteadyClock::now() - wall_start).count();
  merge_parts(measured, wall, result);
  result.peak_in_flight = peak_in_flight.load();
  if (scraper) result.server = scraper->stop();
  cancel_requested_ = false;
  result.backlog = client_backlog(result.requests, result.metrics);
  const double lag_p99_ms = result.metrics.schedule_lag_ms.percentile(99);
  result.generator_limited = lag_p99_ms > to_ms(spec.lag_bound) || result.generator_cpu > spec.cpu_saturation;
  return result;
}

}  // namespace capsweep::loadgen

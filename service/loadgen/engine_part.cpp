#include "loadgen/engine_part.hpp"

#include <fmt/format.h>
#include <sys/resource.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <limits>
#include <thread>

#include "core/log.hpp"
#include "llm/target.hpp"

namespace capsweep::loadgen {

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
}  // namespace

double thread_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

bool EnginePart::generator_behind() const {
  if (measured_lagging * 100 > measured_dispatched) return true;
  const double wall = to_s(now());
  return wall > 1 && (thread_cpu_seconds() - cpu_at_start) / wall > spec.cpu_saturation;
}

void EnginePart::consider_stopping(const RequestRecord& rec) {
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

RequestRow request_row(const RequestRecord& rec, std::uint64_t index, bool with_itl) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  RequestRow row;
  row.index = index;
  row.scheduled_ms = to_ms(rec.scheduled);
  row.dispatched_ms = to_ms(rec.dispatched);
  row.sent_ms = to_ms(rec.sent);
  row.finished_ms = rec.outcome == Outcome::incomplete ? nan : to_ms(rec.finished);
  row.ttft_ms = rec.chunks.empty() || !rec.generated ? nan : to_ms(*rec.first_token() - rec.scheduled);
  row.e2el_ms = rec.outcome == Outcome::ok && !rec.chunks.empty() ? to_ms(*rec.last_token() - rec.scheduled) : nan;
  row.input_tokens = rec.input_tokens;
  row.output_tokens = rec.output_tokens;
  row.chunks = static_cast<std::uint32_t>(rec.chunks.size());
  row.turn = rec.turn;
  row.outcome = rec.outcome;
  if (with_itl && rec.outcome == Outcome::ok && rec.chunks.size() > 1) {
    for_each_token_gap_ms(rec, [&row](double gap) { row.itl_ms.push_back(static_cast<float>(gap)); });
  }
  return row;
}

std::vector<std::string> model_names(const llm::Target& t) {
  std::vector<std::string> out;
  for (const llm::ModelShare& m : t.models) out.push_back(m.name);
  return out;
}

std::string_view EnginePart::model_name(std::uint16_t model) const {
  return model < target.models.size() ? std::string_view(target.models[model].name) : std::string_view();
}

std::uint16_t EnginePart::pick_replica(std::uint64_t unit) const {
  const std::size_t n = std::min(target.replica_count(), llm::kMaxReplicas);
  const auto first = static_cast<std::uint16_t>(unit % n);
  if (target.balance == llm::Balance::round_robin) return first;
  std::uint16_t best = first;
  std::uint32_t least = progress.replica_in_flight[first].load(std::memory_order_relaxed);
  for (std::size_t d = 1; d < n; ++d) {
    const auto k = static_cast<std::uint16_t>((first + d) % n);
    const std::uint32_t here = progress.replica_in_flight[k].load(std::memory_order_relaxed);
    if (here < least) best = k, least = here;
  }
  return best;
}

void EnginePart::record_row(const RequestRecord& rec, std::uint64_t index) {
  if (spec.on_record) spec.on_record(index, rec);
  if (spec.keep_rows) keeper.keep(rec, index, RowKeeper::kMaxItlSamples / share.parts, rows);
}

void RowKeeper::keep(const RequestRecord& rec, std::uint64_t index, std::size_t budget, std::vector<RequestRow>& rows) {
  const bool itl_wanted = rec.outcome == Outcome::ok && rec.chunks.size() > 1;
  const bool with_itl = itl_wanted && kept < budget;
  if (itl_wanted && !with_itl) cut = true;
  rows.push_back(request_row(rec, index, with_itl));
  kept += rows.back().itl_ms.size();
}

void EnginePart::enter() {
  ++in_flight;
  peak_in_flight = std::max(peak_in_flight, in_flight);
  const std::uint64_t total = progress.in_flight.fetch_add(1, std::memory_order_relaxed) + 1;
  std::uint64_t seen = peak_total.load(std::memory_order_relaxed);
  while (total > seen && !peak_total.compare_exchange_weak(seen, total, std::memory_order_relaxed)) {
  }
}

void EnginePart::launch(std::uint64_t index, Nanos scheduled, Nanos dispatched) {
  enter();
  asio::co_spawn(io, one(index, scheduled, dispatched), log_exception);
}

asio::awaitable<void> EnginePart::one(std::uint64_t index, Nanos scheduled, Nanos dispatched) {
  RequestRecord rec;
  rec.scheduled = scheduled;
  rec.dispatched = dispatched;
  if (spec.track_live) live[index] = &rec;
  co_await exchange(index, rec, [&] {
    const std::uint64_t unit = spec.request_index_base + index;
    const llm::WorkItem item = workload.item(unit, spec.prompt_salt);
    rec.model = target.model_for(workload.spec().seed, unit);
    rec.replica = pick_replica(unit);
    rec.input_tokens = item.input_tokens;
    if (item.abandon_without_first_token) rec.abandon_at = scheduled + *item.abandon_without_first_token;
    rec.abandon_after_tokens = item.abandon_after_tokens;
    rec.inputs = static_cast<std::uint32_t>(item.inputs.size());
    rec.chunks.reserve(std::min<std::uint32_t>(item.max_tokens, 4096));  // no regrowth on typical answers
    return llm::request_body(target, {.prompt = item.prompt,
                                      .messages = item.messages,
                                      .inputs = item.inputs,
                                      .max_tokens = item.max_tokens,
                                      .model = model_name(rec.model)});
  });
  finish(rec, index);
}

asio::awaitable<void> EnginePart::exchange(std::uint64_t index, RequestRecord& rec,
                                           const std::function<std::string()>& build) {
  try {
    std::string body = build();
    progress.sent.fetch_add(1, std::memory_order_relaxed);
    if (spec.fail_request && *spec.fail_request == index)
      throw std::runtime_error("test hook: request failed in the generator");
    // Named, not a braced temporary in the call: with GCC 12, a braced RequestIds passed by
    // value to the endpoint's coroutine crashed at its destruction (free(): invalid pointer);
    // named and moved, it does not.
    RequestIds ids{fmt::format("capsweep-{}-{}", spec.seed, index), traceparent(spec.trace_id, index)};
    // In flight on its replica while it is sent (least_in_flight reads it), however it ends.
    std::atomic<std::uint32_t>& on_replica = progress.replica_in_flight[rec.replica % llm::kMaxReplicas];
    on_replica.fetch_add(1, std::memory_order_relaxed);
    struct Leave {
      std::atomic<std::uint32_t>& n;
      ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
    } leave{on_replica};
    co_await endpoint->send(std::move(body), rec, t0, std::move(ids));
    peak_connections = std::max<std::uint64_t>(peak_connections, endpoint->open_connections());
  } catch (const std::exception& e) {
    rec.outcome = Outcome::client_error;
    rec.chunks.clear();
    if (!client_error_logged) {
      client_error_logged = true;
      log::error(fmt::format("loadgen: request {} failed in the generator: {}", index, e.what()));
    }
  }
}

void EnginePart::finish(RequestRecord& rec, std::uint64_t index) {
  if (rec.outcome == Outcome::cancelled && abandoning && !cancelled) rec.outcome = Outcome::incomplete;
  if (spec.track_live) live.erase(index);
  record_row(rec, index);
  if (spec.on_ended) spec.on_ended(rec);
  if (rec.outcome == Outcome::ok && !rec.chunks.empty() && rec.generated && rec.scheduled >= spec.warmup) {
    live_ttft_ms.add(to_ms(*rec.first_token() - rec.scheduled));
  }
  acc.add(rec);
  if (rec.scheduled >= spec.warmup && measured_pending > 0) --measured_pending;
  if (decider) consider_stopping(rec);
  (rec.outcome == Outcome::ok ? progress.done : progress.failed).fetch_add(1, std::memory_order_relaxed);
  --in_flight;
  progress.in_flight.fetch_sub(1, std::memory_order_relaxed);
  // A slot freed: the oldest request waiting behind the concurrency cap goes now (sessions:
  // when a session ends, engine_session.cpp).
  if (!capped.empty() && !abandoning && !cancelled && !workload.spec().sessions) {
    const Waiting w = capped.front();
    capped.pop_front();
    launch(w.index, w.scheduled, w.dispatched);
  }
  if (in_flight == 0 && sessions_open == 0) drained.cancel();
}

asio::awaitable<void> EnginePart::dispatch_rate() {
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
    if (cap > 0 && (workload.spec().sessions ? sessions_open : in_flight) >= cap) {
      capped.push_back({i, times[k], dispatched});
    } else if (workload.spec().sessions) {
      start_session(i, times[k], dispatched);
    } else {
      launch(i, times[k], dispatched);
    }
  }
}

asio::awaitable<void> EnginePart::worker(Nanos end, std::uint32_t user) {
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

asio::awaitable<void> EnginePart::monitor() {
  // Event-loop delay: how late a 5 ms timer fires; and the live p95 TTFT.
  auto next = SteadyClock::now();
  int ticks = 0;
  while (!stopping || in_flight > 0 || sessions_open > 0) {
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

asio::awaitable<void> EnginePart::main() {
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
    for (std::uint32_t w = share.part; w < spec.concurrency; w += share.parts) {
      asio::co_spawn(io, workload.spec().sessions ? session_user(end) : worker(end, w), log_exception);
    }
    while (!stopping && (spec.requests ? next_index() < *spec.requests : now() < end)) {
      dispatch_timer.expires_at(spec.requests ? SteadyClock::now() + std::chrono::milliseconds(5) : t0 + end);
      co_await dispatch_timer.async_wait(use_tuple);
    }
  }
  stopping = true;
  // Drain: wait for the requests in flight (and the sessions' turns still to come) until the
  // drain deadline.
  while ((in_flight > 0 || !capped.empty() || sessions_open > 0) && now() < drain_deadline && !cancelled) {
    drained.expires_at(t0 + drain_deadline);
    co_await drained.async_wait(use_tuple);
  }
  if (in_flight > 0 || !capped.empty() || sessions_open > 0) {
    abandoning = true;
    // Requests still waiting behind the cap never went out: incomplete all the same.
    settle_waiting(cancelled ? Outcome::cancelled : Outcome::incomplete);
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
      log::error(fmt::format("loadgen: {} requests did not settle {} s after being aborted; the step ends without them",
                             in_flight, std::chrono::duration_cast<std::chrono::seconds>(kSettleBound).count()));
      io.stop();
      co_return;
    }
  }
  monitor_timer.cancel();
}

void EnginePart::take_result(PartResult& out) {
  out.self.loop_delay_p99_ms = loop_delay_ms.percentile(99);
  out.self.loop_delay_max_ms = loop_delay_ms.max();
  out.self.peak_connections = peak_connections;
  out.self.sessions = session_counts;
  out.itl_lists_cut = keeper.cut;
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

void EnginePart::settle_waiting(Outcome outcome) {
  const bool sessions = workload.spec().sessions.has_value();
  for (const auto& w : capped) {
    RequestRecord rec;
    rec.scheduled = w.scheduled;
    rec.dispatched = rec.sent = w.dispatched;
    rec.turn = sessions ? 1 : 0;  // a session waiting: its first turn never went
    rec.outcome = outcome;
    record_row(rec, sessions ? w.index * llm::kMaxSessionTurns : w.index);
    acc.add(rec);
    if (spec.on_ended) spec.on_ended(rec);
  }
  capped.clear();
}

void EnginePart::cancel() {
  cancelled = true;
  stopping = true;
  dispatch_timer.cancel();
  abandoning = true;
  settle_waiting(Outcome::cancelled);
  endpoint->cancel_all();
  drained.cancel();
}

}  // namespace capsweep::loadgen

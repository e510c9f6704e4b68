#include "loadgen/step_runner.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <cmath>
#include <cstdlib>
#include <future>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "loadgen/endpoint.hpp"
#include "loadgen/engine_part.hpp"
#include "loadgen/warm_up.hpp"
#include "observe/scraper.hpp"

namespace capsweep::loadgen {

StepRunner::StepRunner(llm::Target target, std::shared_ptr<const llm::Workload> workload, EndpointFactory endpoint)
    : target_(std::move(target)),
      workload_(std::move(workload)),
      endpoint_(endpoint ? std::move(endpoint) : http_endpoint(target_)) {}

StepRunner::~StepRunner() = default;

void StepRunner::cancel() {
  cancel_requested_ = true;
  std::lock_guard lock(active_mutex_);
  for (void* part : active_) {
    auto* s = static_cast<EnginePart*>(part);
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
    auto* s = active_.size() == 1 ? static_cast<EnginePart*>(active_.front()) : nullptr;
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

bool generator_limited(const StepSpec& spec, double lag_p99_ms, double busiest_cpu_share) noexcept {
  if (busiest_cpu_share > spec.cpu_saturation) return true;
  const bool burst = spec.mode == Mode::rate && spec.arrival.process == ArrivalProcess::all_at_once && !spec.schedule;
  return !burst && lag_p99_ms > to_ms(spec.lag_bound);
}

Result<StepPlan> plan_step(const StepSpec& spec, bool sessions) {
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
  plan.window.sessions = sessions && spec.mode == Mode::rate;
  return plan;
}

namespace {

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

}  // namespace

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

namespace {

// Runs one part on the calling thread (its generator thread) and takes what it measured; once
// its io_context stopped, `detach` unregisters it from cancel(). The part's state is freed here, so that its memory
// goes back to this thread's arena and the arena's top can be handed back at once.
template <class Detach>
void run_part(std::unique_ptr<EnginePart> state, PartResult& out, Detach detach) {
  const double cpu0 = thread_cpu_seconds();
  asio::co_spawn(state->io, state->main(), log_exception);
  if (state->cancelled) asio::post(state->io, [s = state.get()] { s->cancel(); });
  state->io.run();
  out.self.cpu_s = thread_cpu_seconds() - cpu0;
  detach(state.get());
  state->take_result(out);
  if (state->unsettled) {
    // Coroutines still reference the state; leaking it is bounded, freeing it is not safe.
    static_cast<void>(state.release());
  }
  state.reset();
  trim_thread_arena();
}

// The generators' own watch as the step's: CPU seconds, connections and sessions summed; loop
// delay at the worst generator; the busiest one's share of a core. Returns the worst
// generator's own schedule lag p99 (0 when every generator's records carry theirs).
double add_shares(const std::vector<GeneratorShare>& shares, double wall_s,
                  const std::optional<llm::SessionSpec>& sessions, StepResult& result) {
  double busiest = 0, worst_lag = 0;
  SessionCounts counts;
  for (const GeneratorShare& s : shares) {
    result.generator_cpu_s += s.cpu_s;
    busiest = std::max(busiest, s.cpu_s);
    result.loop_delay_p99_ms = std::max(result.loop_delay_p99_ms, s.loop_delay_p99_ms);
    result.loop_delay_max_ms = std::max(result.loop_delay_max_ms, s.loop_delay_max_ms);
    worst_lag = std::max(worst_lag, s.lag_p99_ms);
    result.peak_connections += s.peak_connections;
    counts.add(s.sessions);
  }
  result.generator_cpu = wall_s > 0 ? busiest / wall_s : 0;
  if (sessions && counts.started > 0) {
    counts.history = sessions->history;
    counts.shape = sessions->shape;
    result.sessions = counts;
  }
  return worst_lag;
}

// spec.decide: the part that decides (the only one) gets its decider. A decision looks at
// requests as they end; a session's later turns are not yet scheduled then, so a step of
// sessions runs its fixed length, as one with nothing to decide does.
void give_decider(EnginePart& part, const StepSpec& spec, bool sessions) {
  if (!spec.decide || spec.mode != Mode::rate || spec.requests || sessions) return;
  part.decider.emplace(spec.decide->slo, spec.warmup, spec.decide->settings);
  if (!part.decider->can_decide()) part.decider.reset();
}

// The step's engine parts, each holding its share of the one schedule (engine_parts of them).
Result<std::vector<std::unique_ptr<EnginePart>>> make_parts(const StepSpec& spec, const StepPlan& plan,
                                                            const llm::Target& target, const EndpointFactory& endpoint,
                                                            const llm::Workload& workload, Progress& progress,
                                                            std::atomic<std::uint64_t>& peak_in_flight) {
  // An agent's slice is one part of the agents' split; else this process's own parts.
  const std::uint32_t parts = spec.slice ? spec.slice->parts : engine_parts(spec);
  const std::uint32_t first = spec.slice ? spec.slice->part : 0;
  const std::uint32_t last = spec.slice ? first + 1 : parts;
  if (first >= parts) return invalid("/slice", "an agent's part must be below the parts of the step");
  std::vector<std::unique_ptr<EnginePart>> states;
  for (std::uint32_t p = first; p < last; ++p) {
    auto state = std::make_unique<EnginePart>(target, endpoint, workload, spec, progress, plan.window, peak_in_flight);
    state->share = split_schedule(plan.schedule, p, parts, schedule_salt(spec));
    state->cap = cap_per_part(spec, parts);
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

void fold_step(std::vector<PartResult>& parts, const std::vector<GeneratorShare>& shares, double wall_s,
               const StepSpec& spec, const std::optional<llm::SessionSpec>& sessions, StepResult& result) {
  PartResult& first = parts.front();
  for (std::size_t p = 1; p < parts.size(); ++p) {
    PartResult& other = parts[p];
    first.acc->merge(std::move(*other.acc));
    first.rows.insert(first.rows.end(), std::make_move_iterator(other.rows.begin()),
                      std::make_move_iterator(other.rows.end()));
    first.itl_lists_cut = first.itl_lists_cut || other.itl_lists_cut;
    first.cancelled = first.cancelled || other.cancelled;
  }
  if (parts.size() > 1) {
    completion_order(first.rows, [](const RequestRow& r) {
      return std::isnan(r.finished_ms) ? std::numeric_limits<double>::infinity() : r.finished_ms;
    });
  }
  result.trace_id = spec.trace_id;
  result.itl_lists_cut = first.itl_lists_cut;
  result.cancelled = first.cancelled;
  result.stopped_by = first.stopped_by;
  result.decision = first.decision;
  result.looks = first.looks;
  result.look_confidence = first.look_confidence;
  result.metrics = std::move(*first.acc).finish();
  result.requests = std::move(first.rows);
  const double worst_lag = add_shares(shares, wall_s, sessions, result);
  result.backlog = client_backlog(result.requests, result.metrics);
  const double lag_p99_ms = std::max(result.metrics.schedule_lag_ms.percentile(99), worst_lag);
  result.generator_limited = generator_limited(spec, lag_p99_ms, result.generator_cpu);
}

std::uint32_t engine_parts(const StepSpec& spec) {
  const std::uint32_t most = std::max<std::uint32_t>(spec.engine_threads, 1);
  // What sees every request as it happens (a decision, live views, callbacks) runs on one part.
  if (spec.slice || most == 1 || spec.decide || spec.track_live || spec.on_scheduled || spec.on_ended) return 1;
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

// The prefix cache before the step: warmed with each shared prefix once when the step asks.
PrefixCacheState StepRunner::prepare_prefix_cache(const StepSpec& spec) {
  PrefixCacheState out;
  const llm::PrefixSpec& prefix = workload_->spec().prefix;
  // What the step did, not what the spec asked: a cold or warm cache is the salted prompts'.
  out.state = spec.prompt_salt != 0 ? prefix.cache : llm::PrefixCache::as_found;
  out.shared_prefixes = prefix.any();
  if (!spec.warm_prefixes) return out;
  const WarmUp w = warm_up(target_, endpoint_, workload_->warm_prompts(spec.prompt_salt),
                           [this] { return cancel_requested_.load(); });
  out.warm_requests = w.sent;
  out.warm_failed = w.failed;
  out.warm_s = w.seconds;
  return out;
}

std::uint64_t schedule_salt(const StepSpec& spec) {
  return spec.seed * 0x9E3779B97F4A7C15ULL ^ spec.request_index_base;
}

Result<std::uint64_t> StepRunner::schedule_digest(const StepSpec& spec, std::uint32_t parts) const {
  auto plan = plan_step(spec, workload_->spec().sessions.has_value());
  if (!plan) return plan.error();
  return split_schedule(plan->schedule, 0, std::max<std::uint32_t>(parts, 1), schedule_salt(spec)).digest;
}

Result<StepResult> StepRunner::run(const StepSpec& spec) {
  if (spec.agents) return run_on_agents(spec);
  auto plan = plan_step(spec, workload_->spec().sessions.has_value());
  if (!plan) return plan.error();
  const PrefixCacheState prefix_cache = prepare_prefix_cache(spec);
  std::atomic<std::uint64_t> peak_in_flight{0};
  auto made = make_parts(spec, *plan, target_, endpoint_, *workload_, progress_, peak_in_flight);
  if (!made) return made.error();
  std::vector<std::unique_ptr<EnginePart>> states = std::move(*made);
  const auto parts = static_cast<std::uint32_t>(states.size());
  give_decider(*states.front(), spec, workload_->spec().sessions.has_value());
  progress_.reset();
  const bool cancelled_before = cancel_requested_.exchange(false);  // cancelled before it began
  {
    std::lock_guard lock(active_mutex_);
    for (const auto& st : states) {
      active_.push_back(st.get());
      if (cancelled_before) st->cancelled = true;
    }
  }

  StepResult result;
  result.prefix_cache = prefix_cache;
  result.engine_parts = parts;
  result.schedule_digest = states.front()->share.digest;
  result.concurrency_cap_per_part = states.front()->cap;
  const auto t0 = spec.start_at.value_or(SteadyClock::now() + std::chrono::milliseconds(20));
  for (const auto& st : states) st->t0 = t0;
  std::optional<observe::Scraper> scraper;
  start_scraper(scraper, spec, target_, t0);
  const auto wall_start = SteadyClock::now();
  std::vector<PartResult> measured(parts);
  std::vector<std::thread> generators;
  for (std::uint32_t p = 0; p < parts; ++p) {
    generators.emplace_back([this, &measured, p, state = std::move(states[p])]() mutable {
      run_part(std::move(state), measured[p], [this](EnginePart* s) {
        std::lock_guard lock(active_mutex_);
        std::erase(active_, static_cast<void*>(s));
      });
    });
  }
  for (auto& g : generators) g.join();
  const double wall = std::chrono::duration<double>(SteadyClock::now() - wall_start).count();
  std::vector<GeneratorShare> shares;
  for (const PartResult& part : measured) shares.push_back(part.self);
  fold_step(measured, shares, wall, spec, workload_->spec().sessions, result);
  result.peak_in_flight = peak_in_flight.load();
  if (scraper) result.server = scraper->stop();
  cancel_requested_ = false;
  return result;
}

}  // namespace capsweep::loadgen

// Sessions (workload.sessions) on an engine part: each session sends its turns in order, a
// think time after each answer, with the whole conversation so far. In rate mode the sessions
// (not the requests) arrive by the schedule; in concurrency mode each user runs one session
// after another. A turn is timed from when it was due (the answer before it plus the think
// time), as a request of the schedule is from its scheduled time.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "llm/session_shapes.hpp"
#include "llm/target.hpp"
#include "loadgen/engine_part.hpp"

namespace capsweep::loadgen {

namespace {
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

// The request a turn sends: the conversation as chat messages where the target's API takes
// them, else as one prompt; where the server keeps it, the new messages and what they continue.
// `model`: the session's model ("": the target's).
std::string turn_body(const llm::Target& target, const llm::SessionFlow& flow, std::uint32_t max_tokens,
                      std::string_view model) {
  const llm::Conversation& chat = flow.conversation();
  if (const auto kept = flow.kept_turn()) {
    const std::string messages = chat.messages_json(kept->first_new);
    return llm::request_body(target, {.messages = messages, .max_tokens = max_tokens, .model = model},
                             std::string_view(kept->previous_id));
  }
  if (llm::api_row(target.api).messages) {
    const std::string messages = chat.messages_json();
    return llm::request_body(target, {.messages = messages, .max_tokens = max_tokens, .model = model});
  }
  const std::string prompt = chat.as_prompt();
  return llm::request_body(target, {.prompt = prompt, .max_tokens = max_tokens, .model = model});
}
}  // namespace

bool EnginePart::turn_may_go(Nanos due) const {
  if (cancelled || abandoning || decision) return false;
  if (due >= drain_deadline) return false;
  return spec.requests || due < spec.duration;  // a timed step sends nothing due after its end
}

asio::awaitable<bool> EnginePart::wait_for_turn(Nanos due) {
  asio::steady_timer timer(io);
  while (turn_may_go(due) && now() < due) {
    timer.expires_at(std::min(t0 + due, SteadyClock::now() + std::chrono::milliseconds(20)));
    co_await timer.async_wait(use_tuple);
  }
  co_return turn_may_go(due);
}

void EnginePart::start_session(std::uint64_t s, Nanos arrival, Nanos dispatched) {
  ++sessions_open;
  ++session_counts.started;
  asio::co_spawn(io, session(s, arrival, dispatched), log_exception);
}

asio::awaitable<void> EnginePart::session(std::uint64_t s, Nanos arrival, Nanos dispatched) {
  const llm::SessionShapeRow& row = llm::session_shape_row(workload.spec().sessions->shape);
  const std::unique_ptr<llm::SessionFlow> flow = row.start(workload, spec.request_index_base + s, spec.prompt_salt);
  Nanos due = arrival;
  // A session talks to one replica, as to one model: a server keeping the conversation
  // (server_state) or its prefix cache holds it there.
  const std::uint16_t replica = pick_replica(spec.request_index_base + s);
  bool ended = true;  // every turn answered
  std::vector<std::string> events;
  llm::TurnAnswer answer;
  for (std::uint32_t k = 0; k < llm::kMaxSessionTurns; ++k) {
    const std::optional<llm::NextTurn> turn = flow->next(k == 0 ? nullptr : &answer);
    if (!turn) break;
    if (k > 0) {
      due = now() + turn->think_before;
      if (!co_await wait_for_turn(due)) {
        ++session_counts.cut;
        ended = false;
        break;
      }
      dispatched = now();
      progress.scheduled.fetch_add(1, std::memory_order_relaxed);
      if (spec.on_scheduled) spec.on_scheduled(due);
    }
    events.clear();
    const std::optional<std::uint32_t> answered =
        co_await send_turn(s * llm::kMaxSessionTurns + k, k, *turn, *flow, {due, dispatched, replica}, events);
    if (!answered) {
      // A failed turn: its user does not go on with a conversation missing an answer.
      if (!turn_may_go(due)) {
        ++session_counts.cut;
      } else {
        ++session_counts.broken;
      }
      ended = false;
      break;
    }
    answer = {.output_tokens = *answered, .events = flow->wants_answer() ? &events : nullptr};
  }
  end_session(ended);
}

asio::awaitable<std::optional<std::uint32_t>> EnginePart::send_turn(std::uint64_t index, std::uint32_t k,
                                                                    const llm::NextTurn& turn,
                                                                    const llm::SessionFlow& flow, TurnPlan plan,
                                                                    std::vector<std::string>& events) {
  RequestRecord rec;
  rec.scheduled = plan.due;
  rec.dispatched = plan.dispatched;
  rec.replica = plan.replica;
  rec.turn = static_cast<std::uint16_t>(k + 1);
  if (flow.wants_answer()) rec.events = &events;
  if (spec.track_live) live[index] = &rec;
  enter();
  ++session_counts.turns_sent;
  co_await exchange(index, rec, [&] {
    rec.input_tokens = flow.conversation().tokens();
    // A session talks to one model: drawn for the session, as a request's is for the request.
    rec.model = target.model_for(workload.spec().seed, spec.request_index_base + index / llm::kMaxSessionTurns);
    return turn_body(target, flow, turn.max_tokens, model_name(rec.model));
  });
  const bool ok = rec.outcome == Outcome::ok && !rec.chunks.empty();
  const std::uint32_t answered = rec.output_tokens;
  finish(rec, index);
  co_return ok ? std::optional<std::uint32_t>(answered) : std::nullopt;
}

void EnginePart::end_session(bool answered) {
  if (answered) ++session_counts.completed;
  --sessions_open;
  // A session ended: the oldest one waiting behind the cap on open sessions begins now.
  if (!capped.empty() && !abandoning && !cancelled) {
    const Waiting w = capped.front();
    capped.pop_front();
    start_session(w.index, w.scheduled, w.dispatched);
  }
  if (in_flight == 0 && sessions_open == 0 && capped.empty()) drained.cancel();
}

asio::awaitable<void> EnginePart::session_user(Nanos end) {
  while (!stopping && now() < end && (!spec.requests || next_index() < *spec.requests)) {
    const std::uint64_t s = next_index();
    ++next_local;
    const Nanos t = now();
    progress.scheduled.fetch_add(1, std::memory_order_relaxed);
    ++sessions_open;
    ++session_counts.started;
    co_await session(s, t, t);
  }
}

}  // namespace capsweep::loadgen

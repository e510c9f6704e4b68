#include "loadgen/agent_ledger.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/schedule.hpp"
#include "llm/session.hpp"

namespace capsweep::loadgen {

namespace {

constexpr std::uint64_t mix(std::uint64_t h, std::uint64_t v) noexcept {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ULL;
}

std::uint64_t bits(Nanos t) noexcept {
  return static_cast<std::uint64_t>(t.count());
}

// A request's unit: itself, or a session's turn's session.
std::uint64_t unit_of(const IndexedRecord& r) noexcept {
  return r.rec.turn > 0 ? r.index / llm::kMaxSessionTurns : r.index;
}

}  // namespace

std::uint64_t record_digest(const IndexedRecord& r) noexcept {
  const RequestRecord& x = r.rec;
  std::uint64_t h = mix(0, r.index);
  for (Nanos t : {x.scheduled, x.dispatched, x.sent, x.finished}) h = mix(h, bits(t));
  h = mix(h, (std::uint64_t{x.input_tokens} << 32) | x.output_tokens);
  h = mix(h, (std::uint64_t{x.reasoning_tokens} << 32) | (std::uint64_t{x.turn} << 16) |
                 (static_cast<std::uint64_t>(x.outcome) << 8) | (x.output_tokens_estimated ? 1U : 0U) |
                 (x.streamed ? 2U : 0U) | (x.generated ? 4U : 0U));
  h = mix(h, (std::uint64_t{x.replica} << 48) | (std::uint64_t{x.model} << 32) | x.inputs);
  for (const Chunk& c : x.chunks)
    h = mix(mix(h, bits(c.arrival)), (std::uint64_t{c.tokens} << 1) | (c.reasoning ? 1U : 0U));
  return mix(h, x.chunks.size());
}

ShareLedger::ShareLedger(const StepExpectation* expect, std::uint32_t part, std::uint32_t parts)
    : expect_(expect), part_(part), parts_(parts == 0 ? 1 : parts) {}

std::string ShareLedger::check_times(const IndexedRecord& r) const {
  const RequestRecord& x = r.rec;
  const Nanos tol = expect_->tolerance;
  const auto out_of_order = [&](const char* what) {
    return fmt::format("agent {} sent request {} with {}: its instants are out of order", part_, r.index, what);
  };
  if (x.scheduled < Nanos(0)) return out_of_order("a scheduled time before the step's origin");
  if (x.dispatched + tol < x.scheduled) return out_of_order("a dispatch before its schedule");
  // A request that failed inside the generator was never sent: it has no send or end.
  if (x.outcome == Outcome::client_error && x.chunks.empty()) return check_schedule(r);
  if (x.sent + tol < x.dispatched) return out_of_order("a send before its dispatch");
  if (!x.chunks.empty()) {
    if (x.chunks.front().arrival + tol < x.sent) return out_of_order("a first token before it was sent");
    // The chunks' gaps are never negative (decode_record): the last token is the latest.
    if (x.finished + tol < x.chunks.back().arrival) return out_of_order("an end before its last token");
  }
  const bool settled_unsent = x.outcome == Outcome::incomplete || x.outcome == Outcome::cancelled;
  if (!settled_unsent && x.finished + tol < x.sent) return out_of_order("an end before it was sent");
  return check_schedule(r);
}

std::string ShareLedger::check_schedule(const IndexedRecord& r) const {
  const RequestRecord& x = r.rec;
  const bool scheduled_here = !expect_->closed_loop && x.turn <= 1;
  if (scheduled_here && x.scheduled != expect_->send_times[unit_of(r)]) {
    return fmt::format("agent {} sent request {} scheduled at {:.3f} ms where the step's schedule has {:.3f} ms", part_,
                       r.index, to_ms(x.scheduled), to_ms(expect_->send_times[unit_of(r)]));
  }
  return "";
}

std::string ShareLedger::check(const IndexedRecord& r) const {
  const std::uint16_t turn = r.rec.turn;
  if (expect_->max_turns == 0 && turn != 0) {
    return fmt::format("agent {} sent request {} as turn {} of a session: this step has no sessions", part_, r.index,
                       turn);
  }
  if (expect_->max_turns > 0 &&
      (turn == 0 || turn > expect_->max_turns || r.index % llm::kMaxSessionTurns != turn - 1U)) {
    return fmt::format("agent {} sent request {} as turn {}: a session's turns are 1 to {}, each at its own index",
                       part_, r.index, turn, expect_->max_turns);
  }
  if (r.rec.model >= expect_->models || r.rec.replica >= expect_->replicas) {
    return fmt::format("agent {} sent request {} to model {} of replica {}: the target has {} model(s), {} replica(s)",
                       part_, r.index, r.rec.model, r.rec.replica, expect_->models, expect_->replicas);
  }
  const std::uint64_t unit = unit_of(r);
  if (unit % parts_ != part_) {
    return fmt::format("agent {} sent request {}, another agent's", part_, r.index);
  }
  if (!expect_->closed_loop && unit >= expect_->send_times.size()) {
    return fmt::format("agent {} sent request {}, which is not in the step's schedule of {}", part_, r.index,
                       expect_->send_times.size());
  }
  return check_times(r);
}

std::string ShareLedger::take(std::vector<IndexedRecord>& batch, std::vector<IndexedRecord>& kept) {
  if (expect_ == nullptr) return fmt::format("agent {} sent records for no step", part_);
  // First every record is checked, against the ledger and the rest of the batch; then kept.
  std::unordered_map<std::uint64_t, std::uint64_t> fresh;
  for (const IndexedRecord& r : batch) {
    if (auto why = check(r); !why.empty()) return why;
    const std::uint64_t digest = record_digest(r);
    const auto before = seen_.find(r.index);
    const auto [in_batch, added] = fresh.emplace(r.index, digest);
    const std::uint64_t known = before != seen_.end() ? before->second : in_batch->second;
    if ((before != seen_.end() || !added) && known != digest) {
      return fmt::format("agent {} sent request {} twice, with different records", part_, r.index);
    }
  }
  for (IndexedRecord& r : batch) {
    if (!seen_.emplace(r.index, record_digest(r)).second) continue;  // sent again, the same
    if (r.rec.turn <= 1) {
      highest_unit_ = units_ == 0 ? unit_of(r) : std::max(highest_unit_, unit_of(r));
      ++units_;
    }
    kept.push_back(std::move(r));
  }
  return "";
}

std::string ShareLedger::complete() const {
  if (expect_ == nullptr) return fmt::format("agent {} ended no step", part_);
  // Rate mode: every unit of the share's schedule; closed loop: every unit up to the last sent.
  const std::uint64_t want = expect_->closed_loop ? (units_ == 0 ? 0 : (highest_unit_ - part_) / parts_ + 1)
                                                  : part_count(expect_->send_times.size(), part_, parts_);
  if (units_ == want) return "";
  return fmt::format("agent {} ended its share with {} of its {} {} recorded: the load would silently shrink", part_,
                     units_, want, expect_->max_turns > 0 ? "sessions" : "requests");
}

}  // namespace capsweep::loadgen

#pragma once
// A load agent's records are evidence, not numbers to add (DESIGN §10). The ledger of one
// agent's share of a step checks every record before capsweepd folds it: its index is of
// this agent's share of the step's schedule (a session's turn: of its session, within the
// job's turns), it comes once (the same record again changes nothing; another one for the
// same index makes the step invalid), its instants are ordered (scheduled ≤ dispatched ≤ sent
// ≤ first token ≤ last token ≤ finished, within the clock bound) and a scheduled request's
// scheduled time is the schedule's; and when the agent says it is done, its share is whole.
// A batch is taken whole or not at all. Pure: no I/O, no clock, no locks.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/time.hpp"
#include "loadgen/agent_wire.hpp"

namespace capsweep::loadgen {

// What every agent's records of a step are checked against.
struct StepExpectation {
  // Rate mode: the whole schedule, unit j (a request, or a session's first turn) due at
  // send_times[j]. Closed loop: empty, units numbered as sent.
  std::vector<Nanos> send_times;
  bool closed_loop = false;
  // The job's sessions' most turns (0: no sessions: every record's turn is 0).
  std::uint32_t max_turns = 0;
  // How far two instants on an agent's clock may disagree with their order.
  Nanos tolerance = std::chrono::milliseconds(1);
  // The target's models and replicas (target.models, target.base_urls): a record's indices
  // into them are below these.
  std::uint32_t models = 1, replicas = 1;
};

class ShareLedger {
 public:
  ShareLedger() = default;
  ShareLedger(const StepExpectation* expect, std::uint32_t part, std::uint32_t parts);

  // Checks a batch of the agent's records. "" when every one may be kept: the ones not seen
  // before are appended to `kept`. Otherwise why not, naming the agent and the request, and
  // nothing of the batch is kept.
  std::string take(std::vector<IndexedRecord>& batch, std::vector<IndexedRecord>& kept);
  // "" when the agent's share is whole (every request of it recorded, settled or not),
  // otherwise what is missing.
  std::string complete() const;
  // Records taken (each index once).
  std::uint64_t records() const noexcept { return seen_.size(); }

 private:
  // Why `r` cannot be a record of this share ("" when it can).
  std::string check(const IndexedRecord& r) const;
  std::string check_times(const IndexedRecord& r) const;
  std::string check_schedule(const IndexedRecord& r) const;

  const StepExpectation* expect_ = nullptr;
  std::uint32_t part_ = 0, parts_ = 1;
  std::unordered_map<std::uint64_t, std::uint64_t> seen_;  // request index → its record's digest
  std::uint64_t units_ = 0;                                // requests or sessions seen
  std::uint64_t highest_unit_ = 0;                         // of this share, while units_ > 0
};

// A digest of a record, exact to its every field and chunk.
std::uint64_t record_digest(const IndexedRecord& r) noexcept;

}  // namespace capsweep::loadgen

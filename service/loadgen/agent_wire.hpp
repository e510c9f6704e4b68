#pragma once
// The load agents' wire format (schema/agent-protocol.schema.json): an ended request's raw
// record as a compact JSON array, exact to the nanosecond, so that capsweepd folds an agent's
// requests into the step as it folds its own; and the clock estimate an agent makes of
// capsweepd's clock from four-timestamp exchanges.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <vector>

#include "core/error.hpp"
#include "core/record.hpp"

namespace capsweep::loadgen {

// [index, scheduled, dispatched, sent, finished, input_tokens, output_tokens,
//  reasoning_tokens, outcome, turn, flags, arrivals, tokens, reasoning]: times in ns from
// the step's origin; flags bit 0 output_tokens_estimated, bit 1 not streamed, bit 2 no
// generated tokens (embeddings, rerank: one chunk of 0 tokens); arrivals the
// chunks' arrival times, the first from the origin and each next as a gap from the one
// before; tokens each chunk's token count (empty when every chunk carried one); reasoning
// the positions of the reasoning chunks. Then, where there is one, the target's error message
// ("" when there is none but more follows), the items the request sent (embeddings' inputs,
// rerank's documents; 0 for none) and the model it asked for (its index in target.models),
// each only as far as the last that is not the default.
nlohmann::json encode_record(std::uint64_t index, const RequestRecord& rec);
// The record back, or an error naming the element at fault (under `field`).
struct IndexedRecord {
  std::uint64_t index = 0;
  RequestRecord rec;
};
Result<IndexedRecord> decode_record(const nlohmann::json& j, const std::string& field);

// What an agent says of its share when it sends its last records ("summary" of the done
// batch): its schedule lag p99, engine CPU, event-loop delay, peak connections, requests sent,
// and a step of sessions' counts. Encoded and decoded here only, for both ends.
struct ShareSummary {
  double lag_p99_ms = 0, cpu_s = 0, loop_delay_p99_ms = 0, loop_delay_max_ms = 0;
  std::uint64_t peak_connections = 0, sent = 0;
  struct Sessions {
    std::uint64_t started = 0, completed = 0, cut = 0, broken = 0, turns_sent = 0;
  };
  std::optional<Sessions> sessions;
};
nlohmann::json encode_summary(const ShareSummary& s);
// The summary back, or an error naming the field at fault (under `field`): every figure a
// finite number of at least 0, counts whole; no other keys.
Result<ShareSummary> decode_summary(const nlohmann::json& j, const std::string& field);

// One exchange: the agent sent at t1 (its clock), capsweepd received at t2 and answered at t3
// (its clock), the agent received at t4; nanoseconds.
struct ClockSample {
  std::int64_t t1 = 0, t2 = 0, t3 = 0, t4 = 0;
};
// capsweepd's clock minus the agent's, and the bound on its error (half the round trip less
// capsweepd's own time): from the exchange with the smallest round trip. nullopt: none given.
struct ClockEstimate {
  std::int64_t offset_ns = 0;
  std::int64_t error_ns = 0;
  std::int64_t rtt_ns = 0;
};
std::optional<ClockEstimate> estimate_clock(const std::vector<ClockSample>& samples);

}  // namespace capsweep::loadgen

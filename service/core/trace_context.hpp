#pragma once
// W3C Trace Context for the requests a step sends: one trace per step, one span per request.
// Every request carries `traceparent: 00-<trace id>-<span id>-01`, so a slow request in the
// target's own traces (vLLM exports OpenTelemetry) is found from capsweep's record and back.
// Both ids are derived, not drawn: the trace id from the job's id and the step's index, a
// span id from the trace id and the request's index. capsweepd, every load agent and the
// requests.csv export therefore name the same request alike without sending ids around.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace capsweep {

struct TraceId {
  std::uint64_t hi = 0, lo = 0;
  bool valid() const noexcept { return hi != 0 || lo != 0; }  // all zeros is invalid in W3C
  std::string hex() const;                                    // 32 lowercase hex digits
  friend bool operator==(const TraceId&, const TraceId&) = default;
};

// The trace of a job's step (never all zeros).
TraceId step_trace_id(std::string_view job_id, std::uint64_t step) noexcept;
// The span of a step's request `index` (never zero).
std::uint64_t request_span_id(const TraceId& trace, std::uint64_t index) noexcept;
// "00-<trace>-<span>-01" (sampled); "" for an invalid trace.
std::string traceparent(const TraceId& trace, std::uint64_t index);

// 32 lowercase hex digits, not all zeros.
std::optional<TraceId> parse_trace_id(std::string_view s) noexcept;

struct Traceparent {
  TraceId trace;
  std::uint64_t span = 0;
  std::uint8_t flags = 0;
};
// A traceparent header of version 00: "00-" 32 hex "-" 16 hex "-" 2 hex, lowercase, with
// neither id all zeros; nullopt otherwise.
std::optional<Traceparent> parse_traceparent(std::string_view s) noexcept;

}  // namespace capsweep

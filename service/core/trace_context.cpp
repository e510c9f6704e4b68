// W3C Trace Context ids, derived from a step and a request.
#include "core/trace_context.hpp"

#include <fmt/format.h>

#include "core/random.hpp"

namespace capsweep {

namespace {

// FNV-1a over the job's id, then mixed: a job id of any length as one word.
std::uint64_t word_of(std::string_view s) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return splitmix64(h);
}

// Exactly n lowercase hex digits.
std::optional<std::uint64_t> hex_word(std::string_view s, std::size_t n) noexcept {
  if (s.size() != n) return std::nullopt;
  std::uint64_t v = 0;
  for (const char c : s) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (d < 0) return std::nullopt;
    v = (v << 4) | static_cast<std::uint64_t>(d);
  }
  return v;
}

}  // namespace

std::string TraceId::hex() const {
  return fmt::format("{:016x}{:016x}", hi, lo);
}

TraceId step_trace_id(std::string_view job_id, std::uint64_t step) noexcept {
  TraceId t;
  t.hi = splitmix64(word_of(job_id) ^ 0x7472616365ULL);  // "trace"
  t.lo = splitmix64(t.hi ^ splitmix64(step));
  if (!t.valid()) t.lo = 1;
  return t;
}

std::uint64_t request_span_id(const TraceId& trace, std::uint64_t index) noexcept {
  const std::uint64_t span = splitmix64(trace.lo ^ splitmix64(trace.hi ^ index));
  return span == 0 ? 1 : span;
}

std::string traceparent(const TraceId& trace, std::uint64_t index) {
  if (!trace.valid()) return {};
  return fmt::format("00-{}-{:016x}-01", trace.hex(), request_span_id(trace, index));
}

std::optional<TraceId> parse_trace_id(std::string_view s) noexcept {
  if (s.size() != 32) return std::nullopt;
  const auto hi = hex_word(s.substr(0, 16), 16), lo = hex_word(s.substr(16), 16);
  if (!hi || !lo) return std::nullopt;
  const TraceId t{*hi, *lo};
  if (!t.valid()) return std::nullopt;
  return t;
}

std::optional<Traceparent> parse_traceparent(std::string_view s) noexcept {
  // 2 + 1 + 32 + 1 + 16 + 1 + 2
  if (s.size() != 55 || s.substr(0, 3) != "00-" || s[35] != '-' || s[52] != '-') return std::nullopt;
  const auto trace = parse_trace_id(s.substr(3, 32));
  const auto span = hex_word(s.substr(36, 16), 16);
  const auto flags = hex_word(s.substr(53, 2), 2);
  if (!trace || !span || *span == 0 || !flags) return std::nullopt;
  return Traceparent{*trace, *span, static_cast<std::uint8_t>(*flags)};
}

}  // namespace capsweep

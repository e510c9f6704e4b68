#pragma once
// What the load engine records for one request: monotonic time points as offsets from the
// step's origin, the arrival and token count of every content chunk, and the outcome.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.hpp"

namespace capsweep {

// Outcome of a request. `incomplete` is a request still running when the drain timeout ended.
enum class Outcome : std::uint8_t {
  ok,
  connect,  // could not connect
  tls,      // TLS handshake or certificate failure
  timeout,  // a connect/read deadline expired
  http_4xx,
  http_5xx,
  stream_error,  // malformed stream, or an {"error": ...} event mid-stream, or a dropped stream
  empty_stream,  // the stream ended without a content token
  cancelled,     // the step was cancelled while the request ran
  incomplete,    // still running when the drain timeout ended
  client_error,  // the load generator itself failed on this request (e.g. out of memory)
  abandoned,     // the user gave up (workload.abandon): closed before the end, not an error
  truncated,     // the stream ended (EOF) without a finish reason and without [DONE]
};
inline constexpr std::size_t kOutcomeCount = 13;

std::string_view to_string(Outcome o) noexcept;

// One content chunk: when it arrived, how many tokens it carried (>= 1; 0 only as the one chunk
// of an answer of no generated tokens), and whether they were
// reasoning (a reasoning model's hidden thinking, before its visible answer).
struct Chunk {
  Nanos arrival{0};
  std::uint32_t tokens = 1;
  bool reasoning = false;
};

// What names one request to its target: its X-Request-Id and its W3C traceparent ("" for
// none: the header is not sent).
struct RequestIds {
  std::string request_id, traceparent;
};

struct RequestRecord {
  Nanos scheduled{0};         // from the schedule: when the user wanted to send it
  Nanos dispatched{0};        // when the generator took it up (= sent unless a concurrency cap queued it)
  Nanos sent{0};              // first byte written
  Nanos finished{0};          // the request ended on the client (last byte, error, or abandonment)
  std::vector<Chunk> chunks;  // content chunks in arrival order (first = first token)
  std::uint32_t input_tokens = 0;
  std::uint32_t output_tokens = 0;  // from the server's usage, else counted
  bool output_tokens_estimated = false;
  bool streamed = true;  // false: a non-streamed answer, its one "chunk" the whole answer
  // false: an answer of no generated tokens (embeddings, rerank): its one chunk, of 0 tokens,
  // the whole answer's arrival; it has an E2EL and no TTFT, ITL or TPOT.
  bool generated = true;
  // The items the request sent (embeddings' inputs, rerank's documents); 0 for an API of none.
  std::uint32_t inputs = 0;
  // The model it asked for: its index in the target's models (target.models; 0 without).
  std::uint16_t model = 0;
  // The replica it was sent to: its index in the target's base_urls (0 without).
  std::uint16_t replica = 0;
  // Of output_tokens, the reasoning ones: usage's completion_tokens_details.reasoning_tokens
  // when the server sent it, else the reasoning chunks' tokens counted.
  std::uint32_t reasoning_tokens = 0;
  Outcome outcome = Outcome::ok;
  // What the target said of a failure (an error event's or an error answer's message, at most
  // 200 bytes); empty otherwise.
  std::string error_message;
  // A session's turn (workload.sessions), 1-based; 0 for a request of no session.
  std::uint16_t turn = 0;
  // A user who gives up (workload.abandon): with no first token by abandon_at (from the step's
  // origin), or after abandon_after_tokens tokens (0: never), the client closes the stream
  // and the request ends `abandoned`.
  std::optional<Nanos> abandon_at;
  std::uint32_t abandon_after_tokens = 0;
  // When set (quality requests, never a timed step's): every SSE data payload of the answer,
  // or the whole body of a non-streamed one, is appended here as it arrives.
  std::vector<std::string>* events = nullptr;

  std::optional<Nanos> first_token() const {
    if (chunks.empty()) return std::nullopt;
    return chunks.front().arrival;
  }
  std::optional<Nanos> last_token() const {
    if (chunks.empty()) return std::nullopt;
    return chunks.back().arrival;
  }
  // The first token the user sees (not reasoning): a reasoning model's time to first output.
  std::optional<Nanos> first_output_token() const {
    for (const Chunk& c : chunks) {
      if (!c.reasoning) return c.arrival;
    }
    return std::nullopt;
  }
};

// Calls f(gap_ms) once per generated token gap of a request: a chunk of k tokens after a gap g
// gives k gaps of g / k; the first chunk's extra tokens arrived with the first token, so they
// belong to TTFT, not to any gap. The ITL samples of a step and of each request's own list.
template <class F>
void for_each_token_gap_ms(const RequestRecord& r, F&& f) {
  for (std::size_t i = 1; i < r.chunks.size(); ++i) {
    const std::uint32_t k = r.chunks[i].tokens > 0 ? r.chunks[i].tokens : 1;
    const double gap = to_ms(r.chunks[i].arrival - r.chunks[i - 1].arrival) / k;
    for (std::uint32_t t = 0; t < k; ++t) f(gap);
  }
}

// Calls f(gap_ms, reasoning) once per token gap between two chunks of the same kind (reasoning
// after reasoning, visible after visible), split as for_each_token_gap_ms splits them: the ITL
// of a reasoning model's thinking and of its answer, each over its own gaps. The gap from the
// last reasoning chunk to the first visible one is neither's (it is TTFO − the last thought).
template <class F>
void for_each_phase_gap_ms(const RequestRecord& r, F&& f) {
  for (std::size_t i = 1; i < r.chunks.size(); ++i) {
    if (r.chunks[i].reasoning != r.chunks[i - 1].reasoning) continue;
    const std::uint32_t k = r.chunks[i].tokens > 0 ? r.chunks[i].tokens : 1;
    const double gap = to_ms(r.chunks[i].arrival - r.chunks[i - 1].arrival) / k;
    for (std::uint32_t t = 0; t < k; ++t) f(gap, r.chunks[i].reasoning);
  }
}

}  // namespace capsweep

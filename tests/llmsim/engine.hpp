#pragma once
// The simulated inference engine of capsweep-llmsim: iteration-level (continuous) batching
// as vLLM does it, without I/O or clocks. The server asks for an iteration, sleeps for its
// duration against a monotonic clock, then ends it and delivers the tokens it produced.
//
// Model:
//  - Requests wait FCFS. An iteration first admits waiting requests, in order, while
//    running < max_num_seqs and the KV tokens reserved (prompt + max output, reserved on
//    admission) stay <= kv_cache_tokens. The head of the queue is never skipped.
//  - Iteration time = decode_base_ms + decode_per_seq_ms x running (after admission)
//                     + prefill_ms_per_token x prompt tokens admitted in this iteration.
//  - At the end of an iteration every running sequence emits one token; a newly admitted one
//    emits its first token at the end of the iteration that prefilled it. A sequence that
//    emitted max_tokens finishes and frees its KV reservation.
//  - Prefix caching (prefix_cache_blocks > 0), as vLLM's automatic prefix caching: a prompt is
//    cut into blocks of kBlockTokens tokens, each named by a hash chained over every block
//    before it. On admission the leading blocks found in the cache are not prefilled (at least
//    one prompt token always is); once a sequence's prefill iteration ends, its full blocks
//    enter the cache, the least recently used leaving when it is full. So two requests admitted
//    in one iteration do not hit each other's blocks. Cached blocks are not counted against
//    kv_cache_tokens (the reservation stays prompt + max output).

#include <cstdint>
#include <deque>
#include <list>
#include <unordered_map>
#include <vector>

#include "core/error.hpp"
#include "core/time.hpp"

namespace capsweep::llmsim {

struct EngineParams {
  std::uint32_t max_num_seqs = 64;
  std::uint64_t kv_cache_tokens = 262'144;
  double decode_base_ms = 8.0;
  double decode_per_seq_ms = 0.25;
  double prefill_ms_per_token = 0.02;
  std::uint32_t max_model_len = 32'768;
  std::uint64_t prefix_cache_blocks = 0;  // 0: no prefix caching
};

// Tokens per block of the prefix cache (vLLM's default block size).
inline constexpr std::uint32_t kBlockTokens = 16;

// Checks parameter ranges; errors name the parameter as "/NAME".
Result<EngineParams> validate(const EngineParams& p);

using SeqId = std::uint64_t;

struct SeqRequest {
  std::uint32_t prompt_tokens = 1;
  std::uint32_t max_tokens = 1;
  std::uintptr_t user = 0;  // the caller's handle, echoed in emissions
  // The prompt's full blocks of kBlockTokens tokens, each hash chained over the blocks before
  // it (block_hashes.hpp); empty: nothing to look up or cache.
  std::vector<std::uint64_t> blocks;
};

// Tokens one sequence produced at the end of an iteration.
struct Emission {
  SeqId id = 0;
  std::uintptr_t user = 0;
  std::uint32_t index = 0;  // 0-based index of the token emitted
  bool finished = false;    // this was the sequence's last token
};

class Engine {
 public:
  explicit Engine(EngineParams params);

  // Queues a request. Errors: a request that can never fit (prompt + max_tokens above
  // max_model_len or kv_cache_tokens), or max_tokens == 0.
  Result<SeqId> submit(const SeqRequest& req);
  // Removes a request (client gone): frees its KV if running. Unknown ids are ignored.
  void cancel(SeqId id);

  // Nothing running and nothing waiting.
  bool idle() const noexcept { return running_.empty() && waiting_.empty(); }

  struct Plan {
    Nanos duration{0};
    std::uint32_t admitted = 0;
    std::uint32_t running = 0;  // after admission
    std::uint64_t prefill_tokens = 0;
  };
  // Starts an iteration: admits what fits and returns its duration. Precondition: !idle().
  Plan begin_iteration();
  // Ends the iteration begun last: appends one emission per running sequence to `out` (in
  // admission order) and frees finished sequences.
  void end_iteration(std::vector<Emission>& out);

  std::size_t running() const noexcept { return running_.size(); }
  std::size_t waiting() const noexcept { return waiting_.size(); }
  std::uint64_t kv_reserved() const noexcept { return kv_reserved_; }
  // Prefix caching's counters, in prompt tokens (vLLM's prefix_cache_queries / _hits): every
  // admitted prompt's tokens, and those of them found cached.
  std::uint64_t prefix_queries() const noexcept { return prefix_queries_; }
  std::uint64_t prefix_hits() const noexcept { return prefix_hits_; }
  std::size_t cached_blocks() const noexcept { return lru_.size(); }
  double kv_usage() const noexcept;  // reserved / capacity, 0..1
  const EngineParams& params() const noexcept { return params_; }

 private:
  struct Seq {
    SeqId id;
    SeqRequest req;
    std::uint32_t emitted = 0;
  };
  // Prompt tokens of `req` found in the prefix cache (its leading blocks), at most all but one.
  std::uint32_t cached_tokens(const SeqRequest& req);
  void cache_blocks(const std::vector<std::uint64_t>& blocks);
  EngineParams params_;
  std::deque<Seq> waiting_;
  std::vector<Seq> running_;
  std::uint64_t kv_reserved_ = 0;
  SeqId next_id_ = 1;
  std::list<std::uint64_t> lru_;  // cached block hashes, most recently used first
  std::unordered_map<std::uint64_t, std::list<std::uint64_t>::iterator> cached_;
  std::uint64_t prefix_queries_ = 0, prefix_hits_ = 0;
};

}  // namespace capsweep::llmsim

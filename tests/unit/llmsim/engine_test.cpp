#include "llmsim/engine.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;
using namespace capsweep::llmsim;
using namespace std::chrono_literals;

namespace {
EngineParams params(std::uint32_t max_seqs = 4, std::uint64_t kv = 1000) {
  EngineParams p;
  p.max_num_seqs = max_seqs;
  p.kv_cache_tokens = kv;
  p.decode_base_ms = 10;
  p.decode_per_seq_ms = 1;
  p.prefill_ms_per_token = 0.1;
  p.max_model_len = 4096;
  return p;
}
}  // namespace

TEST_CASE("llmsim engine: iteration time is base + per-seq x running + prefill of admitted") {
  Engine e(params());
  e.submit({100, 3, 1, {}}).value();
  e.submit({50, 3, 2, {}}).value();
  auto plan = e.begin_iteration();
  CHECK(plan.admitted == 2);
  CHECK(plan.running == 2);
  CHECK(plan.prefill_tokens == 150);
  CHECK(plan.duration == Nanos(static_cast<Nanos::rep>((10 + 2 * 1 + 150 * 0.1) * 1e6)));  // 27 ms
  std::vector<Emission> out;
  e.end_iteration(out);
  auto next = e.begin_iteration();  // pure decode now
  CHECK(next.admitted == 0);
  CHECK(next.duration == 12ms);
}

TEST_CASE("llmsim engine: every running sequence emits one token per iteration in order") {
  Engine e(params());
  const SeqId a = e.submit({10, 2, 100, {}}).value();
  const SeqId b = e.submit({10, 3, 200, {}}).value();
  std::vector<Emission> out;
  e.begin_iteration();
  e.end_iteration(out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].id == a);
  CHECK(out[0].user == 100);
  CHECK(out[0].index == 0);
  CHECK_FALSE(out[0].finished);
  CHECK(out[1].id == b);
  out.clear();
  e.begin_iteration();
  e.end_iteration(out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].index == 1);
  CHECK(out[0].finished);  // a asked for 2 tokens
  CHECK_FALSE(out[1].finished);
  out.clear();
  e.begin_iteration();
  e.end_iteration(out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].id == b);
  CHECK(out[0].index == 2);
  CHECK(out[0].finished);
  CHECK(e.idle());
  CHECK(e.kv_reserved() == 0);
}

TEST_CASE("llmsim engine: max_num_seqs bounds the batch and the rest waits FCFS") {
  Engine e(params(2, 100000));
  for (int i = 0; i < 5; ++i) e.submit({10, 1, static_cast<std::uintptr_t>(i), {}}).value();
  std::vector<Emission> out;
  auto plan = e.begin_iteration();
  CHECK(plan.admitted == 2);
  CHECK(e.waiting() == 3);
  e.end_iteration(out);
  CHECK(out[0].user == 0);
  CHECK(out[1].user == 1);
  out.clear();
  e.begin_iteration();
  e.end_iteration(out);
  CHECK(out[0].user == 2);
  CHECK(out[1].user == 3);
}

TEST_CASE("llmsim engine: KV reservations of prompt + max output limit admission, head never skipped") {
  Engine e(params(10, 300));
  e.submit({100, 100, 1, {}}).value();  // 200
  e.submit({100, 100, 2, {}}).value();  // 200: does not fit beside the first
  e.submit({10, 10, 3, {}}).value();    // 20 would fit, but FCFS never skips the head
  auto plan = e.begin_iteration();
  CHECK(plan.admitted == 1);
  CHECK(e.kv_reserved() == 200);
  CHECK(e.kv_usage() == Approx(200.0 / 300));
  CHECK(e.waiting() == 2);
  std::vector<Emission> out;
  for (int i = 0; i < 100; ++i) {
    out.clear();
    e.begin_iteration();
    e.end_iteration(out);
  }
  // The first finished on its 100th token and freed its KV; the next iteration admits both.
  auto later = e.begin_iteration();
  CHECK(later.admitted == 2);
  CHECK(e.kv_reserved() == 220);
}

TEST_CASE("llmsim engine: a new sequence emits its first token at the end of its prefill iteration") {
  Engine e(params());
  e.submit({10, 5, 1, {}}).value();
  std::vector<Emission> out;
  e.begin_iteration();
  e.end_iteration(out);
  e.submit({400, 5, 2, {}}).value();  // arrives during decoding
  out.clear();
  auto plan = e.begin_iteration();
  CHECK(plan.admitted == 1);
  CHECK(plan.duration == Nanos(static_cast<Nanos::rep>((10 + 2 + 40) * 1e6)));
  e.end_iteration(out);
  REQUIRE(out.size() == 2);
  CHECK(out[1].user == 2);
  CHECK(out[1].index == 0);
}

TEST_CASE("llmsim engine: cancel frees a running sequence and forgets a waiting one") {
  Engine e(params(1, 1000));
  const SeqId a = e.submit({10, 50, 1, {}}).value();
  const SeqId b = e.submit({10, 50, 2, {}}).value();
  e.begin_iteration();
  std::vector<Emission> out;
  e.end_iteration(out);
  CHECK(e.kv_reserved() == 60);
  e.cancel(b);
  CHECK(e.waiting() == 0);
  e.cancel(a);
  CHECK(e.running() == 0);
  CHECK(e.kv_reserved() == 0);
  CHECK(e.idle());
  e.cancel(12345);  // unknown: ignored
}

TEST_CASE("llmsim engine: requests that can never fit are refused") {
  Engine e(params(4, 500));
  auto too_long = e.submit({4000, 200, 0, {}});
  REQUIRE_FALSE(too_long.has_value());
  CHECK(too_long.error().field == "/max_tokens");
  CHECK(too_long.error().message.find("4096") != std::string::npos);
  CHECK_FALSE(e.submit({400, 200, 0, {}}).has_value());  // 600 > KV 500
  CHECK_FALSE(e.submit({10, 0, 0, {}}).has_value());
  CHECK(e.idle());
}

TEST_CASE("llmsim engine: parameters are validated") {
  CHECK(validate(EngineParams{}).has_value());
  EngineParams p;
  p.max_num_seqs = 0;
  CHECK(validate(p).error().field == "/max_num_seqs");
  p = {};
  p.decode_base_ms = -1;
  CHECK(validate(p).error().field == "/decode_base_ms");
  p = {};
  p.prefill_ms_per_token = std::nan("");
  CHECK(validate(p).error().field == "/prefill_ms_per_token");
  p = {};
  p.kv_cache_tokens = 1;
  CHECK(validate(p).error().field == "/kv_cache_tokens");
}

namespace {
// A prompt of `blocks.size()` full blocks (and `extra` more tokens), the blocks as given.
SeqRequest prompt_of(std::vector<std::uint64_t> blocks, std::uint32_t extra, std::uintptr_t user,
                     std::uint32_t max_tokens = 2) {
  const auto tokens = static_cast<std::uint32_t>(blocks.size() * kBlockTokens + extra);
  return {tokens, max_tokens, user, std::move(blocks)};
}
EngineParams cached_params(std::uint64_t blocks) {
  EngineParams p = params(4, 100'000);
  p.prefix_cache_blocks = blocks;
  return p;
}
}  // namespace

TEST_CASE("llmsim engine: a prompt's leading cached blocks are not prefilled, and are counted as hits") {
  Engine e(cached_params(100));
  e.submit(prompt_of({1, 2, 3}, 4, 1)).value();  // 52 tokens, nothing cached yet
  auto first = e.begin_iteration();
  CHECK(first.prefill_tokens == 52);
  std::vector<Emission> out;
  e.end_iteration(out);  // its prefill ended: blocks 1, 2, 3 are cached
  CHECK(e.cached_blocks() == 3);
  CHECK(e.prefix_queries() == 52);
  CHECK(e.prefix_hits() == 0);

  // Shares blocks 1 and 2, then differs: 2 blocks (32 tokens) hit, the rest is prefilled.
  e.submit(prompt_of({1, 2, 9, 10}, 0, 2)).value();
  auto second = e.begin_iteration();
  CHECK(second.admitted == 1);
  CHECK(second.prefill_tokens == 64 - 32);
  CHECK(second.duration == Nanos(static_cast<Nanos::rep>(std::llround((10 + 2 * 1 + 32 * 0.1) * 1e6))));
  CHECK(e.prefix_queries() == 52 + 64);
  CHECK(e.prefix_hits() == 32);
}

TEST_CASE(
    "llmsim engine: a chain broken at its first block hits nothing, and a whole cached prompt still prefills one "
    "token") {
  Engine e(cached_params(100));
  e.submit(prompt_of({1, 2}, 0, 1)).value();
  e.begin_iteration();
  std::vector<Emission> out;
  e.end_iteration(out);
  e.submit(prompt_of({7, 2}, 0, 2)).value();  // block 2's name is chained: {7, 2} would not share it
  CHECK(e.begin_iteration().prefill_tokens == 32);
  e.end_iteration(out);
  e.submit(prompt_of({1, 2}, 0, 3)).value();  // the same prompt again: all but one token cached
  CHECK(e.begin_iteration().prefill_tokens == 1);
  CHECK(e.prefix_hits() == 31);
}

TEST_CASE("llmsim engine: requests admitted in one iteration do not hit each other's blocks") {
  Engine e(cached_params(100));
  e.submit(prompt_of({1, 2}, 0, 1)).value();
  e.submit(prompt_of({1, 2}, 0, 2)).value();
  CHECK(e.begin_iteration().prefill_tokens == 64);  // neither was computed before this iteration
  CHECK(e.prefix_hits() == 0);
}

TEST_CASE("llmsim engine: the prefix cache evicts its least recently used block when full") {
  Engine e(cached_params(2));
  std::vector<Emission> out;
  auto run = [&](std::vector<std::uint64_t> blocks, std::uintptr_t user) {
    e.submit(prompt_of(std::move(blocks), 1, user, 1)).value();
    const auto plan = e.begin_iteration();
    e.end_iteration(out);
    return plan.prefill_tokens;
  };
  run({1}, 1);
  run({2}, 2);
  CHECK(run({1}, 3) == 1);  // hit: block 1 is now the most recent
  run({3}, 4);              // evicts block 2, the least recent
  CHECK(e.cached_blocks() == 2);
  CHECK(run({2}, 5) == 17);  // gone: prefilled in full, and cached again in place of block 1
  CHECK(run({3}, 6) == 1);   // still cached
  CHECK(run({1}, 7) == 17);  // evicted by block 2
}

TEST_CASE("llmsim engine: without prefix caching nothing is cached or counted") {
  Engine e(params(4, 100'000));
  std::vector<Emission> out;
  e.submit(prompt_of({1, 2}, 0, 1)).value();
  e.begin_iteration();
  e.end_iteration(out);
  e.submit(prompt_of({1, 2}, 0, 2)).value();
  CHECK(e.begin_iteration().prefill_tokens == 32);
  CHECK(e.cached_blocks() == 0);
  CHECK(e.prefix_queries() == 0);
  CHECK(validate(cached_params(200'000'000)).error().field == "/prefix_cache_blocks");
}

#include "llmsim/engine.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace capsweep::llmsim {

Result<EngineParams> validate(const EngineParams& p) {
  auto bad_ms = [](double x) { return !std::isfinite(x) || x < 0 || x > 60'000; };
  if (p.max_num_seqs < 1 || p.max_num_seqs > 1'000'000) return invalid("/max_num_seqs", "must be in [1, 1000000]");
  if (p.kv_cache_tokens < 2) return invalid("/kv_cache_tokens", "must be >= 2");
  if (p.max_model_len < 2) return invalid("/max_model_len", "must be >= 2");
  if (bad_ms(p.decode_base_ms)) return invalid("/decode_base_ms", "must be in [0, 60000]");
  if (bad_ms(p.decode_per_seq_ms)) return invalid("/decode_per_seq_ms", "must be in [0, 60000]");
  if (bad_ms(p.prefill_ms_per_token)) {
    return invalid("/prefill_ms_per_token", "must be in [0, 60000]");
  }
  if (p.prefix_cache_blocks > 100'000'000) return invalid("/prefix_cache_blocks", "must be in [0, 100000000]");
  return p;
}

Engine::Engine(EngineParams params) : params_(params) {}

Result<SeqId> Engine::submit(const SeqRequest& req) {
  if (req.max_tokens == 0) return invalid("/max_tokens", "must be in [1, 1000000]");
  const std::uint64_t need = std::uint64_t{req.prompt_tokens} + req.max_tokens;
  if (need > params_.max_model_len) {
    return invalid("/max_tokens", fmt::format("this model's maximum context length is {} tokens; the request "
                                              "asks for {} ({} prompt + {} completion)",
                                              params_.max_model_len, need, req.prompt_tokens, req.max_tokens));
  }
  if (need > params_.kv_cache_tokens) {
    return invalid("/max_tokens", fmt::format("the request needs {} KV tokens, more than the "
                                              "cache holds ({})",
                                              need, params_.kv_cache_tokens));
  }
  const SeqId id = next_id_++;
  waiting_.push_back({id, req, 0});
  return id;
}

void Engine::cancel(SeqId id) {
  auto w = std::find_if(waiting_.begin(), waiting_.end(), [&](const Seq& s) { return s.id == id; });
  if (w != waiting_.end()) {
    waiting_.erase(w);
    return;
  }
  auto r = std::find_if(running_.begin(), running_.end(), [&](const Seq& s) { return s.id == id; });
  if (r != running_.end()) {
    kv_reserved_ -= std::uint64_t{r->req.prompt_tokens} + r->req.max_tokens;
    running_.erase(r);
  }
}

std::uint32_t Engine::cached_tokens(const SeqRequest& req) {
  if (params_.prefix_cache_blocks == 0) return 0;
  std::uint64_t hit = 0;
  for (const std::uint64_t h : req.blocks) {
    auto it = cached_.find(h);
    if (it == cached_.end()) break;
    lru_.splice(lru_.begin(), lru_, it->second);  // used: most recent now
    ++hit;
  }
  const std::uint64_t tokens = hit * kBlockTokens;
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(tokens, req.prompt_tokens > 0 ? req.prompt_tokens - 1 : 0));
}

void Engine::cache_blocks(const std::vector<std::uint64_t>& blocks) {
  if (params_.prefix_cache_blocks == 0) return;
  for (const std::uint64_t h : blocks) {
    if (auto it = cached_.find(h); it != cached_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      continue;
    }
    if (lru_.size() >= params_.prefix_cache_blocks) {
      cached_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(h);
    cached_[h] = lru_.begin();
  }
}

Engine::Plan Engine::begin_iteration() {
  Plan plan;
  while (!waiting_.empty() && running_.size() < params_.max_num_seqs) {
    Seq& head = waiting_.front();
    const std::uint64_t need = std::uint64_t{head.req.prompt_tokens} + head.req.max_tokens;
    if (kv_reserved_ + need > params_.kv_cache_tokens) break;  // FCFS: never skip the head
    kv_reserved_ += need;
    const std::uint32_t cached = cached_tokens(head.req);
    if (params_.prefix_cache_blocks > 0) {
      prefix_queries_ += head.req.prompt_tokens;
      prefix_hits_ += cached;
    }
    plan.prefill_tokens += head.req.prompt_tokens - cached;
    ++plan.admitted;
    running_.push_back(std::move(head));
    waiting_.pop_front();
  }
  plan.running = static_cast<std::uint32_t>(running_.size());
  const double ms = params_.decode_base_ms + params_.decode_per_seq_ms * plan.running +
                    params_.prefill_ms_per_token * static_cast<double>(plan.prefill_tokens);
  plan.duration = Nanos(static_cast<Nanos::rep>(std::llround(ms * 1e6)));
  return plan;
}

void Engine::end_iteration(std::vector<Emission>& out) {
  std::size_t kept = 0;
  for (std::size_t i = 0; i < running_.size(); ++i) {
    Seq& s = running_[i];
    const bool finished = s.emitted + 1 >= s.req.max_tokens;
    out.push_back({s.id, s.req.user, s.emitted, finished});
    if (s.emitted == 0) cache_blocks(s.req.blocks);  // its prefill ended: its blocks are computed
    ++s.emitted;
    if (finished) {
      kv_reserved_ -= std::uint64_t{s.req.prompt_tokens} + s.req.max_tokens;
    } else {
      if (kept != i) running_[kept] = std::move(s);
      ++kept;
    }
  }
  running_.resize(kept);
}

double Engine::kv_usage() const noexcept {
  return static_cast<double>(kv_reserved_) / static_cast<double>(params_.kv_cache_tokens);
}

}  // namespace capsweep::llmsim

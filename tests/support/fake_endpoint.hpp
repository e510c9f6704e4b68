#pragma once
// An in-process endpoint for the load engine: answers each request after a fixed TTFT with
// `tokens` chunks spaced by a fixed ITL, on the step's own io_context, without a socket. It
// can fail chosen requests with a chosen outcome, or never answer (until cancelled), and it
// counts what it saw so a test can check the engine's dispatch from the endpoint's side.

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "loadgen/endpoint.hpp"

namespace capsweep::testing {

struct FakeModel {
  Nanos ttft = std::chrono::milliseconds(20);
  Nanos itl = std::chrono::milliseconds(5);
  std::uint32_t tokens = 4;
  bool hang = false;  // never answer: requests end only when cancelled
  // A target of replicas (target.base_urls): the ITL on replica k (none: `itl` on every one).
  std::vector<Nanos> replica_itl;
  // The outcome of request `index` (from the request id's last number); ok = answer normally.
  std::function<Outcome(std::uint64_t index)> outcome_of;
  // What an answer says, as the SSE data payloads a target would send for this request body
  // (kept when the request asks for them: quality requests); none: no payloads.
  std::function<std::vector<std::string>(const std::string& body)> answer;
};

// What the fake saw, readable after the step (the runner's generator thread has joined).
struct FakeStats {
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> max_concurrent{0};
  std::atomic<std::uint64_t> cancel_calls{0};
  std::array<std::atomic<std::uint64_t>, 8> by_replica{};  // requests each replica was sent
};

class FakeEndpoint final : public loadgen::Endpoint {
 public:
  FakeEndpoint(boost::asio::io_context& io, FakeModel model, std::shared_ptr<FakeStats> stats)
      : io_(io), model_(std::move(model)), stats_(std::move(stats)) {}

  boost::asio::awaitable<void> send(std::string body, RequestRecord& rec, SteadyClock::time_point origin,
                                    RequestIds ids) override {
    const std::string& request_id = ids.request_id;
    const auto now = [origin] { return SteadyClock::now() - origin; };
    rec.sent = now();
    if (cancelled_) {
      rec.outcome = Outcome::cancelled;
      rec.finished = now();
      co_return;
    }
    stats_->requests++;
    stats_->by_replica[rec.replica % stats_->by_replica.size()]++;
    const Nanos itl = rec.replica < model_.replica_itl.size() ? model_.replica_itl[rec.replica] : model_.itl;
    ++concurrent_;
    stats_->max_concurrent = std::max<std::uint64_t>(stats_->max_concurrent, concurrent_);
    const std::uint64_t index = std::stoull(request_id.substr(request_id.rfind('-') + 1));
    const Outcome planned = model_.outcome_of ? model_.outcome_of(index) : Outcome::ok;
    boost::asio::steady_timer timer(io_);
    timers_.insert(&timer);
    bool alive = co_await wait_for(timer, model_.hang ? Nanos(std::chrono::hours(1)) : model_.ttft);
    if (alive && planned != Outcome::ok) {
      rec.outcome = planned;
    } else {
      for (std::uint32_t k = 0; alive && k < model_.tokens; ++k) {
        if (k > 0) alive = co_await wait_for(timer, itl);
        if (alive) rec.chunks.push_back(Chunk{now(), 1});
      }
      if (alive) rec.output_tokens = model_.tokens;
      if (alive && rec.events && model_.answer) *rec.events = model_.answer(body);
      rec.outcome = alive ? Outcome::ok : Outcome::cancelled;
    }
    timers_.erase(&timer);
    --concurrent_;
    rec.finished = now();
  }

  void cancel_all() override {
    cancelled_ = true;
    stats_->cancel_calls++;
    for (auto* t : timers_) t->cancel();
  }
  std::size_t open_connections() const noexcept override { return 0; }

 private:
  // False when the wait was cut short by cancel_all().
  boost::asio::awaitable<bool> wait_for(boost::asio::steady_timer& timer, Nanos d) {
    timer.expires_after(d);
    auto [ec] = co_await timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    co_return !ec && !cancelled_;
  }

  boost::asio::io_context& io_;
  FakeModel model_;
  std::shared_ptr<FakeStats> stats_;
  std::set<boost::asio::steady_timer*> timers_;
  std::uint64_t concurrent_ = 0;
  bool cancelled_ = false;
};

inline loadgen::EndpointFactory fake_endpoint(FakeModel model, std::shared_ptr<FakeStats> stats) {
  return [model = std::move(model),
          stats = std::move(stats)](boost::asio::io_context& io) -> std::unique_ptr<loadgen::Endpoint> {
    return std::make_unique<FakeEndpoint>(io, model, stats);
  };
}

}  // namespace capsweep::testing

#include "loadgen/quality_runner.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <exception>
#include <memory>
#include <thread>

#include "core/error.hpp"

namespace capsweep::loadgen {

namespace asio = boost::asio;

namespace {

constexpr auto log_exception = [](std::exception_ptr e) { log_escaped("loadgen: quality request failed", e); };

// What a run holds while it runs; touched on its io_context's thread only (cancel posts).
struct QualityState {
  asio::io_context io{1};
  std::unique_ptr<Endpoint> endpoint;
  bool cancelled = false;
  std::size_t next = 0;
  void cancel() {
    cancelled = true;
    if (endpoint) endpoint->cancel_all();
  }
};

}  // namespace

QualityRunner::QualityRunner(EndpointFactory endpoint) : endpoint_(std::move(endpoint)) {}

void QualityRunner::cancel() {
  cancel_requested_ = true;
  std::lock_guard lock(active_mutex_);
  if (auto* s = static_cast<QualityState*>(active_)) asio::post(s->io, [s] { s->cancel(); });
}

std::vector<QualityReply> QualityRunner::run(const std::vector<std::string>& bodies, std::uint32_t concurrency) {
  std::vector<QualityReply> replies(bodies.size());
  progress_.scheduled = bodies.size();
  progress_.sent = progress_.done = progress_.failed = progress_.in_flight = 0;
  auto state = std::make_unique<QualityState>();
  state->endpoint = endpoint_(state->io);
  {
    std::lock_guard lock(active_mutex_);
    active_ = state.get();
  }
  if (cancel_requested_) state->cancelled = true;
  const auto origin = SteadyClock::now();
  QualityState& s = *state;
  auto worker = [&]() -> asio::awaitable<void> {
    while (!s.cancelled && s.next < bodies.size()) {
      const std::size_t i = s.next++;
      QualityReply& reply = replies[i];
      reply.asked = true;
      reply.record.events = &reply.events;
      reply.record.scheduled = reply.record.dispatched = SteadyClock::now() - origin;
      ++progress_.sent;
      ++progress_.in_flight;
      try {
        std::string body = bodies[i];
        RequestIds ids{fmt::format("quality-{}", i), {}};  // named: see EnginePart::exchange
        co_await s.endpoint->send(std::move(body), reply.record, origin, std::move(ids));
      } catch (const std::exception&) {
        reply.record.outcome = Outcome::client_error;
      }
      reply.record.events = nullptr;
      --progress_.in_flight;
      ++progress_.done;
      if (reply.record.outcome != Outcome::ok && reply.record.outcome != Outcome::empty_stream) ++progress_.failed;
    }
  };
  const std::size_t workers = std::min<std::size_t>(std::max<std::uint32_t>(concurrency, 1), bodies.size());
  std::thread runner([&] {
    for (std::size_t w = 0; w < workers; ++w) asio::co_spawn(s.io, worker(), log_exception);
    s.io.run();
  });
  runner.join();
  {
    std::lock_guard lock(active_mutex_);
    active_ = nullptr;
  }
  state->endpoint.reset();
  cancel_requested_ = false;
  return replies;
}

}  // namespace capsweep::loadgen

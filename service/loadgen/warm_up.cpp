#include "loadgen/warm_up.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include "core/error.hpp"
#include "llm/target.hpp"

namespace capsweep::loadgen {

WarmUp warm_up(const llm::Target& target, const EndpointFactory& make_endpoint, const std::vector<std::string>& prompts,
               const std::function<bool()>& stop) {
  WarmUp out;
  if (prompts.empty()) return out;
  boost::asio::io_context io{1};
  auto endpoint = make_endpoint(io);
  const auto origin = SteadyClock::now();
  std::size_t next = 0;
  // Every replica (target.base_urls) is sent every prompt: each caches its own prefixes.
  const std::size_t total = prompts.size() * target.replica_count();
  // A sender takes the next prompt until none is left (one thread: no locking).
  auto sender = [&]() -> boost::asio::awaitable<void> {
    while (next < total && !stop()) {
      const std::size_t k = next++;
      RequestRecord rec;
      rec.replica = static_cast<std::uint16_t>(k / prompts.size());
      RequestIds ids{fmt::format("capsweep-warm-{}", k), {}};  // named: see EnginePart::exchange
      co_await endpoint->send(llm::completion_body(target, prompts[k % prompts.size()], 1), rec, origin,
                              std::move(ids));
      ++out.sent;
      if (rec.outcome != Outcome::ok) ++out.failed;
    }
  };
  const std::size_t senders = std::min(total, kWarmUpInFlight);
  for (std::size_t i = 0; i < senders; ++i) {
    boost::asio::co_spawn(io, sender(), [](std::exception_ptr e) { log_escaped("loadgen: warm-up failed", e); });
  }
  io.run();
  out.seconds = std::chrono::duration<double>(SteadyClock::now() - origin).count();
  return out;
}

}  // namespace capsweep::loadgen

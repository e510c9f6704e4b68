#pragma once
// The seam between the load engine and what it loads: a step runner sends each request through
// an Endpoint and never touches a socket itself. The real one is the HTTP(S) client of
// llm/client.hpp; tests put an in-process fake behind the same interface, so the engine's
// dispatch, drain, cancel and accounting can be checked without a server.

#include <boost/asio/awaitable.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/record.hpp"

namespace boost::asio {
class io_context;
}

namespace capsweep::llm {
struct Target;
}

namespace capsweep::loadgen {

class Endpoint {
 public:
  virtual ~Endpoint() = default;

  // Sends one request with `body`, named by `ids`, and fills rec.sent, rec.chunks,
  // rec.finished, token counts and rec.outcome (times are offsets from `origin`). Never throws
  // for a request's failure: a failure is an outcome.
  virtual boost::asio::awaitable<void> send(std::string body, RequestRecord& rec, SteadyClock::time_point origin,
                                            RequestIds ids) = 0;
  // Aborts every request in flight (they end as `cancelled`, promptly) and refuses new ones.
  virtual void cancel_all() = 0;
  // Connections open (idle + busy); 0 where the endpoint has none.
  virtual std::size_t open_connections() const noexcept = 0;
};

// Makes the endpoint of one step on the step's generator io_context (one thread).
using EndpointFactory = std::function<std::unique_ptr<Endpoint>(boost::asio::io_context&)>;

// The real endpoint: llm::Client against `target`.
EndpointFactory http_endpoint(const llm::Target& target);

}  // namespace capsweep::loadgen

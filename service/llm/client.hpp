#pragma once
// The HTTP(S) client of the load engine: one per target, living on the generator's
// io_context thread. Keeps a keep-alive connection pool that grows with the requests in
// flight, puts a deadline on every operation, streams OpenAI SSE responses and records each
// content chunk's arrival (steady_clock) and token count into a RequestRecord.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <functional>
#include <memory>
#include <string>

#include "core/record.hpp"
#include "llm/target.hpp"

namespace boost::asio {
class io_context;
}

namespace capsweep::llm {

class Client {
 public:
  // Throws std::runtime_error when the TLS context cannot be set up (bad CA file).
  Client(boost::asio::any_io_executor executor, Target target);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends one completion request with `body` (its X-Request-Id and traceparent headers from
  // `ids` where set) and fills rec.sent, rec.chunks, token counts and rec.outcome. Times are
  // offsets from `origin`. Never throws for request failures.
  boost::asio::awaitable<void> send(std::string body, RequestRecord& rec, SteadyClock::time_point origin,
                                    RequestIds ids);

  // A plain request (for calibration and scraping): returns status and body, or status 0 with
  // the error text in the body.
  struct PlainResponse {
    int status = 0;
    std::string body;
  };
  boost::asio::awaitable<PlainResponse> request(std::string method, std::string path, std::string body);

  // request(), blocking the caller: run to its end on `io`, the io_context this client was made
  // on, which nothing else runs meanwhile. An exception inside it is logged under `what` and
  // answers status 0. With `should_stop`, asked every 50 ms: once it says so, every request of
  // this client is cancelled (and later ones refused).
  PlainResponse request_now(boost::asio::io_context& io, std::string method, std::string path, std::string body,
                            std::string_view what, const std::function<bool()>& should_stop = {});

  // Aborts every request in flight (they end as `cancelled`) and refuses new ones.
  void cancel_all();
  // Connections open (idle + busy).
  std::size_t open_connections() const noexcept;
  const Target& target() const noexcept;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace capsweep::llm

#pragma once
// capsweep-llmsim's server: the engine model driven by a monotonic clock on one
// io_context thread, behind vLLM's HTTP API (completions, chat, models, tokenize, health,
// metrics), with cold start and fault injection.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>

#include "llmsim/config.hpp"

namespace capsweep::llmsim {

// How late iterations woke up against their deadlines, in milliseconds.
struct LatenessReport {
  std::uint64_t iterations = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

class SimServer {
 public:
  // Precondition: cfg validated. Runs on `io` (one thread).
  SimServer(boost::asio::io_context& io, SimConfig cfg);
  ~SimServer();

  // Binds the listening socket now (throws on failure) and starts serving; with a cold start
  // in "refuse" mode the socket only listens once the load time has passed.
  void start();
  // The bound address (with port 0 in the config, the port chosen by the system). Valid after
  // start() once listening.
  boost::asio::ip::tcp::endpoint endpoint() const;
  // Stops accepting, lets running streams finish for up to drain_s, then stops `io`.
  void begin_shutdown();
  LatenessReport lateness() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace capsweep::llmsim

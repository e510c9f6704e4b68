#pragma once
// Runs a capsweep-llmsim server in-process on its own thread, on 127.0.0.1 with a port the
// system picks, for the length of a test.

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <memory>
#include <thread>

#include "llmsim/sim_server.hpp"

namespace capsweep::testing {

// A fast simulated model: 2-ms decode steps, little prefill: a step of a few hundred
// requests is answered in seconds, far inside an SLO of hundreds of ms.
inline llmsim::SimConfig fast_sim() {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 2;
  cfg.engine.decode_per_seq_ms = 0.05;
  cfg.engine.prefill_ms_per_token = 0.001;
  return cfg;
}

class SimFixture {
 public:
  explicit SimFixture(llmsim::SimConfig cfg) {
    cfg.listen = "127.0.0.1:0";
    sim_ = std::make_unique<llmsim::SimServer>(io_, cfg);
    sim_->start();
    endpoint_ = sim_->endpoint();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~SimFixture() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
    sim_.reset();
  }
  const boost::asio::ip::tcp::endpoint& endpoint() const { return endpoint_; }
  // Asks the server to shut down gracefully (as SIGTERM does) and waits until it stopped.
  void shutdown_and_wait() {
    boost::asio::post(io_, [this] { sim_->begin_shutdown(); });
    thread_.join();
  }
  llmsim::LatenessReport lateness() const { return sim_->lateness(); }

 private:
  boost::asio::io_context io_{1};
  std::unique_ptr<llmsim::SimServer> sim_;
  boost::asio::ip::tcp::endpoint endpoint_;
  std::thread thread_;
};

}  // namespace capsweep::testing

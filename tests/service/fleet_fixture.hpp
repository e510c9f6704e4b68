#pragma once
// Runs a capsweep-fleetsim fleet in-process: its gateway on 127.0.0.1 with a port the system
// picks, on a thread of its own (the replicas on theirs), for the length of a test.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "fleetsim/fleet.hpp"
#include "support/http_client.hpp"

namespace capsweep::testing {

// A fleet on a thread of its own, its gateway on a port the system picks.
class FleetFixture {
 public:
  explicit FleetFixture(fleetsim::FleetConfig cfg) {
    cfg.listen = "127.0.0.1:0";
    fleet_ = std::make_unique<fleetsim::Fleet>(io_, validated(cfg));
    fleet_->start();
    port_ = fleet_->endpoint().port();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~FleetFixture() {
    boost::asio::post(io_, [this] { fleet_->shutdown(); });
    if (thread_.joinable()) thread_.join();
  }
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::uint16_t port() const { return port_; }
  // PUT /fleet?replicas=n (the fleet runs without its controller).
  void set_replicas(int n) const {
    auto r = http_request({boost::asio::ip::make_address("127.0.0.1"), port_}, "PUT",
                          "/fleet?replicas=" + std::to_string(n), "", std::chrono::milliseconds(2000));
    REQUIRE(r.status == 200);
  }
  // Waits (GET /fleet, at most `limit`) until n replicas have loaded their model, whatever
  // their /health says.
  void wait_ready(int n, std::chrono::milliseconds limit) const {
    const auto until = std::chrono::steady_clock::now() + limit;
    int ready = -1;
    while (std::chrono::steady_clock::now() < until) {
      auto r = http_request({boost::asio::ip::make_address("127.0.0.1"), port_}, "GET", "/fleet", "",
                            std::chrono::milliseconds(2000));
      if (r.status == 200 && (ready = nlohmann::json::parse(r.body).value("ready", -1)) >= n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("the fleet has " << ready << " ready replicas, not " << n);
  }

 private:
  static fleetsim::FleetConfig validated(const fleetsim::FleetConfig& c) {
    auto v = fleetsim::validate(c);
    REQUIRE(v.has_value());
    return *v;
  }
  boost::asio::io_context io_{1};
  std::unique_ptr<fleetsim::Fleet> fleet_;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace capsweep::testing

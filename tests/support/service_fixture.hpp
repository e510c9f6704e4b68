#pragma once
// capsweepd in-process for integration tests: the store, the job manager (its requests to an
// in-process fake endpoint) and the API on an ephemeral loopback port, with a bounded wait for
// a job's end. Tests that register a row of a table (a kind, an arrival process) run it
// through this to a stored verdict.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "api/api.hpp"
#include "api/startup.hpp"
#include "http/server.hpp"
#include "store/store.hpp"
#include "support/fake_endpoint.hpp"
#include "support/http_client.hpp"
#include "support/temp_db.hpp"
#include "sweep/manager.hpp"

namespace capsweep::testing {

struct Service {
  TempDb db;
  api::ServiceConfig config = api::default_config();
  std::unique_ptr<store::Store> store;
  std::unique_ptr<sweep::SweepManager> manager;
  std::unique_ptr<api::Api> api;
  boost::asio::io_context io;
  std::unique_ptr<http::Server> server;
  std::thread thread;
  boost::asio::ip::tcp::endpoint endpoint;

  Service(const std::string& name, FakeModel model) : db{name} {
    config.db = db.path.string();
    store = std::make_unique<store::Store>(config.db);
    sweep::ManagerOptions o = api::manager_options(config);
    o.poll = std::chrono::milliseconds(50);
    o.endpoint = fake_endpoint(std::move(model), std::make_shared<FakeStats>());
    manager = std::make_unique<sweep::SweepManager>(o);
    api = std::make_unique<api::Api>(api::ApiContext{&config, store.get(), manager.get()});
    server = std::make_unique<http::Server>(io.get_executor(), api->handler(), api::server_options(config));
    server->bind({boost::asio::ip::make_address("127.0.0.1"), 0});
    endpoint = server->local_endpoint();
    manager->start();
    server->start();
    thread = std::thread([this] { io.run(); });
  }
  ~Service() {
    server->shutdown();
    manager->stop();
    io.stop();
    thread.join();
  }

  // Polls the job until it ends (bounded: 30 s).
  nlohmann::json wait_end(const std::string& id) {
    for (int i = 0; i < 600; ++i) {
      const auto r = http_request(endpoint, "GET", "/v1/sweeps/" + id);
      if (r.status == 200) {
        const auto j = nlohmann::json::parse(r.body);
        const std::string status = j.value("status", "");
        if (status != "queued" && status != "running") return j;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("job " << id << " did not end within 30 s");
    return {};
  }
};

}  // namespace capsweep::testing

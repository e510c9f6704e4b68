#pragma once
// capsweepd in-process for integration tests: the store, the job manager (its requests to an
// in-process fake endpoint, or over HTTP to the job's target when no model is given) and the
// API on an ephemeral loopback port, with a bounded wait for a job's end. Tests that register a row of a table (a kind,
// an arrival process) run it through this to a stored verdict.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "agent/agent.hpp"
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

  // With `agents`, the API takes a submitter's token and an agent's (kSubmitToken,
  // kAgentToken), and a step on agents accepts a clock bound a loaded 2-core machine keeps.
  Service(const std::string& name, std::optional<FakeModel> model, bool agents = false) : db{name} {
    config.db = db.path.string();
    if (agents) {
      config.tokens = {{.token = kSubmitToken, .can_submit = true, .name = "submit"},
                       {.token = kAgentToken, .name = "agent", .agent = true}};
      config.agents_max_clock_error_ms = 5;
      config.agents_join_timeout_s = 30;
    }
    store = std::make_unique<store::Store>(config.db);
    sweep::ManagerOptions o = api::manager_options(config);
    o.poll = std::chrono::milliseconds(50);
    if (model) o.endpoint = fake_endpoint(std::move(*model), std::make_shared<FakeStats>());
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

  static constexpr const char* kSubmitToken = "submit-token-0123456789abcdef";
  static constexpr const char* kAgentToken = "agent-token-0123456789abcdef";

  // A request to the API, with the submitter's token when the service takes tokens.
  HttpResult call(const std::string& method, const std::string& path, const std::string& body = {}) {
    if (config.tokens.empty()) return http_request(endpoint, method, path, body);
    return http_request(endpoint, method, path, body, {{"Authorization", std::string("Bearer ") + kSubmitToken}});
  }

  // Polls the job until it ends (bounded: 60 s).
  nlohmann::json wait_end(const std::string& id) {
    for (int i = 0; i < 1200; ++i) {
      const auto r = call("GET", "/v1/sweeps/" + id);
      if (r.status == 200) {
        const auto j = nlohmann::json::parse(r.body);
        const std::string status = j.value("status", "");
        if (status != "queued" && status != "running") return j;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL("job " << id << " did not end within 60 s");
    return {};
  }

  // Submits a job of one step and waits for its end, its step sent by `agents` load agents
  // run in this process (0: capsweepd's engine); the stored step, with the job's verdict as
  // "job_verdict".
  nlohmann::json run_check(const nlohmann::json& spec, std::uint32_t agents) {
    const auto r = call("POST", "/v1/sweeps", spec.dump());
    REQUIRE(r.status == 201);
    const std::string id = nlohmann::json::parse(r.body).value("id", "");
    std::vector<std::thread> threads;
    std::vector<int> codes(agents, -1);
    for (std::uint32_t i = 0; i < agents; ++i) {
      agent::AgentOptions o;
      o.server = {"127.0.0.1", std::to_string(endpoint.port()), ""};
      o.token = kAgentToken;
      o.run = id;
      o.index = i;
      o.epoch = i + 1;
      o.give_up = std::chrono::seconds(60);
      threads.emplace_back([o, &codes, i] { codes[i] = agent::run_agent(o); });
    }
    const nlohmann::json job = wait_end(id);
    for (auto& t : threads) t.join();
    for (int c : codes) CHECK(c == 0);  // every agent saw its run done
    REQUIRE(job.value("status", "") == "succeeded");
    const auto steps = nlohmann::json::parse(call("GET", "/v1/sweeps/" + id + "/steps").body);
    REQUIRE(steps["steps"].size() == 1);
    nlohmann::json step = steps["steps"][0];
    step["job_verdict"] = job["result"].value("verdict", "");
    step["job_id"] = id;
    return step;
  }

  // The same one-step job run locally, then on `agents` load agents: both stored steps, once
  // checked to be one step (every part valid, the same schedule digest, the same verdict, a pass).
  std::pair<nlohmann::json, nlohmann::json> local_and_on_agents(nlohmann::json spec, std::uint32_t agents) {
    const nlohmann::json local = run_check(spec, 0);
    spec["agents"] = agents;
    const nlohmann::json shared = run_check(spec, agents);
    INFO(shared["summary"].dump());
    INFO("local: " << local.value("evaluation", nlohmann::json()).dump());
    INFO("on agents: " << shared.value("evaluation", nlohmann::json()).dump());
    CHECK(shared["summary"]["agents"]["parts"] == agents);
    CHECK(shared["summary"]["agents"]["valid"] == true);
    CHECK(shared["summary"]["engine"]["schedule_digest"] == local["summary"]["engine"]["schedule_digest"]);
    CHECK(shared["job_verdict"] == local["job_verdict"]);
    CHECK(local["job_verdict"] == "pass");
    return {local, shared};
  }
};

}  // namespace capsweep::testing

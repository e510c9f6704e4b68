// capsweepd: the capsweep service. Only wiring here: settings (config file, then flags), the
// store, the sweep workers, the HTTP API, and SIGINT/SIGTERM (finish API requests, stop the
// steps in flight, leave running sweeps resumable, exit 0).

#include "api/api.hpp"
#include "api/config.hpp"
#include "http/server.hpp"
#include "store/store.hpp"
#include "sweep/manager.hpp"

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <chrono>
#include <cstdlib>
#include <thread>

using namespace capsweep;

int main(int argc, char** argv) {
  CLI::App app{"capsweepd: finds the highest request rate an LLM endpoint serves within its SLO"};
  std::string config_path, listen, db, allow_csv;
  int max_concurrent = 0;
  bool insecure_no_auth = false;
  app.add_option("--config", config_path, "JSON settings file (schema/config.schema.json); flags override it");
  app.add_option("--listen", listen, "HOST:PORT to serve the API on (default 127.0.0.1:8080)");
  app.add_option("--db", db, "SQLite database file (default capsweep.db)");
  app.add_option("--max-concurrent-sweeps", max_concurrent, "sweeps running at once (each on its own target)")
      ->check(CLI::Range(1, 64));
  app.add_option("--allow-targets", allow_csv, "comma-separated hosts/CIDRs sweeps may target (default loopback)");
  app.add_flag("--insecure-no-auth", insecure_no_auth,
               "serve a non-loopback address without bearer tokens (refused otherwise)");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json doc = nlohmann::json::object();
  if (!config_path.empty()) {
    std::ifstream in(config_path);
    if (!in) {
      fmt::print(stderr, "capsweepd: cannot read config file {}\n", config_path);
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    doc = nlohmann::json::parse(text.str(), nullptr, false);
    if (doc.is_discarded()) {
      fmt::print(stderr, "capsweepd: {} is not valid JSON\n", config_path);
      return 2;
    }
  }
  if (!listen.empty()) doc["listen"] = listen;
  if (insecure_no_auth) doc["insecure_no_auth"] = true;
  if (!db.empty()) doc["db"] = db;
  if (max_concurrent > 0) doc["max_concurrent_sweeps"] = max_concurrent;
  if (!allow_csv.empty()) {
    std::vector<std::string> entries;
    std::stringstream ss(allow_csv);
    for (std::string e; std::getline(ss, e, ',');) {
      if (!e.empty()) entries.push_back(e);
    }
    doc["allow_targets"] = entries;
  }
  auto config = api::parse_config(doc);
  if (!config) {
    fmt::print(stderr, "capsweepd: config {}: {}\n", config.error().field, config.error().message);
    return 2;
  }
  auto endpoint = http::parse_listen_address(config->listen);
  if (!endpoint) {
    fmt::print(stderr, "capsweepd: --listen: {}\n", endpoint.error().message);
    return 2;
  }

  if (!endpoint->address().is_loopback() && config->tokens.empty() && !config->insecure_no_auth) {
    fmt::print(stderr,
               "capsweepd: refusing to serve {} without tokens: anyone who can connect could aim load at your "
               "targets. Configure \"tokens\", listen on loopback, or pass --insecure-no-auth.\n",
               config->listen);
    return 2;
  }

  try {
    store::DaemonLock lock(config->db);
    store::Store store(config->db);
    sweep::ManagerOptions mo;
    mo.db_path = config->db;
    mo.max_concurrent_sweeps = config->max_concurrent_sweeps;
    mo.max_total_sweep = std::chrono::seconds(static_cast<long>(config->limits.max_total_sweep_s));
    mo.max_connections = config->limits.max_connections_per_sweep;
    mo.allow_host = [allow = config->allow](std::string_view host) { return allow.allows(host); };
    mo.max_response_bytes = config->limits.max_response_bytes;
    mo.max_sse_event_bytes = config->limits.max_sse_event_bytes;
    mo.retention_max_age_s = config->retention.max_age_days * 86400;
    mo.retention_max_sweeps = config->retention.max_sweeps;
    sweep::SweepManager manager(mo);
    api::Api api(api::ApiContext{&*config, &store, &manager});

    boost::asio::io_context io;
    http::ServerOptions so;
    so.body_limit = config->limits.max_body_bytes;
    so.server_name = "capsweepd";
    so.max_connections = config->limits.max_api_connections;
    so.max_connections_per_client = config->limits.max_api_connections_per_client;
    so.header_timeout = std::chrono::milliseconds(static_cast<long>(config->limits.header_timeout_s * 1000));
    http::Server server(io.get_executor(), api.handler(), so);
    server.bind(*endpoint);
    manager.start();
    server.start();
    fmt::print(stderr, "{} capsweepd: listening on {} (database {}, schema v{}, {} worker(s){})\n", store::utc_now(),
               config->listen, config->db, store.schema_version(), config->max_concurrent_sweeps,
               config->tokens.empty() ? ", no tokens: open to anyone who can connect" : "");

    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    std::thread stopper;
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      fmt::print(stderr, "{} capsweepd: signal {}: stopping; running sweeps stay resumable\n", store::utc_now(), sig);
      server.shutdown();
      // Stop the workers off the I/O thread; whatever a worker is doing, exit within 10 s
      // (a sweep left `running` is resumed by the next start).
      stopper = std::thread([&manager] {
        std::thread watchdog([] {
          std::this_thread::sleep_for(std::chrono::seconds(10));
          fmt::print(stderr, "{} capsweepd: workers did not stop within 10 s; exiting now\n", store::utc_now());
          std::fflush(stderr);
          std::_Exit(0);
        });
        watchdog.detach();
        manager.stop();
      });
    });
    std::thread second([&io] { io.run(); });
    io.run();
    second.join();
    if (stopper.joinable()) stopper.join();
    manager.stop();
    fmt::print(stderr, "{} capsweepd: stopped\n", store::utc_now());
  } catch (const std::exception& e) {
    fmt::print(stderr, "capsweepd: {}\n", e.what());
    return 1;
  }
  return 0;
}

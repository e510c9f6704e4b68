// capsweepd: the capsweep service. Only wiring here: settings (api/startup), the daemon lock
// and the store, the sweep workers, the HTTP API, and SIGINT/SIGTERM (finish API requests,
// stop the steps in flight, leave running sweeps resumable, exit 0 within 10 s). Under
// systemd (Type=notify) it reports ready once it listens, and stopping on a signal.

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "api/api.hpp"
#include "api/startup.hpp"
#include "api/systemd_notify.hpp"
#include "core/log.hpp"
#include "http/server.hpp"
#include "store/store.hpp"
#include "sweep/manager.hpp"

using namespace capsweep;

namespace {

// Stops the workers off the I/O thread; whatever a worker is doing, the process ends within
// 10 s (a sweep left `running` is resumed by the next start).
std::thread stop_with_deadline(sweep::SweepManager& manager) {
  return std::thread([&manager] {
    std::thread watchdog([] {
      std::this_thread::sleep_for(std::chrono::seconds(10));
      log::error("workers did not stop within 10 s; exiting now");
      std::_Exit(0);
    });
    watchdog.detach();
    manager.stop();
  });
}

}  // namespace

int main(int argc, char** argv) {
  api::without_thread_cache(argv);
  auto startup = api::startup_from_command_line(argc, argv);
  if (const int* code = std::get_if<int>(&startup)) return *code;
  const api::Startup& s = std::get<api::Startup>(startup);
  const api::ServiceConfig& config = s.config;
  try {
    store::DaemonLock lock(config.db);
    store::Store store(config.db);
    sweep::SweepManager manager(api::manager_options(config));
    api::Api api(api::ApiContext{&config, &store, &manager});
    boost::asio::io_context io;
    http::Server server(io.get_executor(), api.handler(), api::server_options(config));
    server.bind(s.endpoint);
    manager.start();
    server.start();
    log::info(fmt::format("listening on {} (database {}, schema v{}, {} worker(s){})", config.listen, config.db,
                          store.schema_version(), config.max_concurrent_sweeps,
                          config.tokens.empty() ? ", no tokens: open to anyone who can connect" : ""));
    api::notify_systemd("READY=1");

    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    std::thread stopper;
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      log::info(fmt::format("signal {}: stopping; running sweeps stay resumable", sig));
      api::notify_systemd("STOPPING=1");
      server.shutdown();
      stopper = stop_with_deadline(manager);
    });
    std::thread second([&io] { io.run(); });
    io.run();
    second.join();
    if (stopper.joinable()) stopper.join();
    manager.stop();
    log::info("stopped");
  } catch (const std::exception& e) {
    log::error(e.what());
    return 1;
  }
  return 0;
}

// capsweep-llmsim: a simulated OpenAI-compatible LLM server with continuous batching.
// Only wiring here: the settings (options.cpp), the server, SIGINT/SIGTERM.

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <memory>
#include <string>
#include <vector>

#include "core/log.hpp"
#include "llmsim/options.hpp"
#include "llmsim/sim_server.hpp"

using namespace capsweep::llmsim;

namespace {

// Replica k's listen address: the port k after the configured one (0 stays 0: the system's pick).
std::string replica_listen(const std::string& listen, std::uint32_t k) {
  const auto colon = listen.rfind(':');
  if (k == 0 || colon == std::string::npos) return listen;
  const unsigned long port = std::stoul(listen.substr(colon + 1));
  return port == 0 ? listen : listen.substr(0, colon + 1) + std::to_string(port + k);
}

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parse_options(argc, argv);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  const SimConfig cfg = std::get<SimConfig>(parsed);
  capsweep::log::set_program("capsweep-llmsim");
  boost::asio::io_context io(1);
  std::vector<std::unique_ptr<SimServer>> servers;
  for (std::uint32_t k = 0; k < cfg.replicas; ++k) {
    SimConfig one = cfg;
    try {
      one.listen = replica_listen(cfg.listen, k);
      servers.push_back(std::make_unique<SimServer>(io, one));
      servers.back()->start();
    } catch (const std::exception& e) {
      fmt::print(stderr, "capsweep-llmsim: cannot listen on {}: {}\n", one.listen, e.what());
      return 1;
    }
    fmt::print(
        stderr,
        "capsweep-llmsim: serving {} on {} (max_num_seqs {}, decode {} + {} x running ms, prefill {} ms/token)\n",
        cfg.model,
        servers.back()->endpoint().address().to_string() + ":" + std::to_string(servers.back()->endpoint().port()),
        cfg.engine.max_num_seqs, cfg.engine.decode_base_ms, cfg.engine.decode_per_seq_ms,
        cfg.engine.prefill_ms_per_token);
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) {
      for (auto& s : servers) s->begin_shutdown();
    }
  });
  io.run();
  for (const auto& s : servers) {
    const auto late = s->lateness();
    fmt::print(stderr,
               "capsweep-llmsim: stopped after {} iterations; lateness p50 {:.3f} ms, p99 {:.3f} ms, max {:.3f} ms\n",
               late.iterations, late.p50_ms, late.p99_ms, late.max_ms);
  }
  return 0;
}

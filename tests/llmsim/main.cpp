// capsweep-llmsim: a simulated OpenAI-compatible LLM server with continuous batching.
// Only wiring here: the settings (options.cpp), the server, SIGINT/SIGTERM.

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "core/log.hpp"
#include "llmsim/options.hpp"
#include "llmsim/sim_server.hpp"

using namespace capsweep::llmsim;

int main(int argc, char** argv) {
  auto parsed = parse_options(argc, argv);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  const SimConfig cfg = std::get<SimConfig>(parsed);
  capsweep::log::set_program("capsweep-llmsim");
  boost::asio::io_context io(1);
  SimServer server(io, cfg);
  try {
    server.start();
  } catch (const std::exception& e) {
    fmt::print(stderr, "capsweep-llmsim: cannot listen on {}: {}\n", cfg.listen, e.what());
    return 1;
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) server.begin_shutdown();
  });
  fmt::print(stderr,
             "capsweep-llmsim: serving {} on {} (max_num_seqs {}, decode {} + {} x running ms, prefill {} ms/token)\n",
             cfg.model, server.endpoint().address().to_string() + ":" + std::to_string(server.endpoint().port()),
             cfg.engine.max_num_seqs, cfg.engine.decode_base_ms, cfg.engine.decode_per_seq_ms,
             cfg.engine.prefill_ms_per_token);
  io.run();
  const auto late = server.lateness();
  fmt::print(stderr,
             "capsweep-llmsim: stopped after {} iterations; lateness p50 {:.3f} ms, p99 {:.3f} ms, max {:.3f} ms\n",
             late.iterations, late.p50_ms, late.p99_ms, late.max_ms);
  return 0;
}

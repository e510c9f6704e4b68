// capsweep-fleetsim: a fleet of simulated replicas behind one gateway, with an HPA-rule
// controller (fleet.hpp). Only wiring here: the flags, the fleet, SIGINT/SIGTERM.

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "core/log.hpp"
#include "fleetsim/fleet.hpp"

using namespace capsweep;
using namespace capsweep::fleetsim;

namespace {

// The flags that are words or seconds on the command line and enums or durations in the
// fleet's settings.
struct FlagText {
  std::string readiness = "honest", termination = "graceful", routing = "round-robin", metric = "in_flight";
  double sync_s = 15, up_window_s = 0, down_window_s = 300, idle_s = 60;
};

// The gateway, the replicas and their engine.
void add_fleet_options(CLI::App& app, FleetConfig& cfg, FlagText& text) {
  app.add_option("--listen", cfg.listen, "the gateway's HOST:PORT")->capture_default_str();
  app.add_option("--model", cfg.replica.model, "the model name served")->capture_default_str();
  app.add_option("--deployment", cfg.deployment, "the deployment label of the kube_* series")->capture_default_str();
  app.add_option("--replicas", cfg.initial_replicas, "replicas at start")->capture_default_str();
  app.add_option("--load-time-s", cfg.load_time_s, "a new replica's cold start")->capture_default_str();
  app.add_option("--readiness", text.readiness, "honest: ready once loaded; lying: ready at once, requests held")
      ->check(CLI::IsMember({"honest", "lying"}))
      ->capture_default_str();
  app.add_option("--termination", text.termination, "graceful: drain streams up to --grace-s; abrupt: cut them")
      ->check(CLI::IsMember({"graceful", "abrupt"}))
      ->capture_default_str();
  app.add_option("--grace-s", cfg.grace_s, "graceful termination: longest drain")->capture_default_str();
  app.add_option("--routing", text.routing, "how the gateway picks a ready replica")
      ->check(CLI::IsMember({"round-robin", "least-loaded"}))
      ->capture_default_str();
  app.add_option("--gpu-saturation-in-flight", cfg.gpu_saturation_in_flight,
                 "the simulated GPU utilisation reaches 100% at this many running")
      ->capture_default_str();
  app.add_option("--queue-timeout-s", cfg.queue_timeout_s, "how long a request waits for a ready replica")
      ->capture_default_str();
  app.add_option("--max-num-seqs", cfg.replica.engine.max_num_seqs, "each replica: most sequences in a batch")
      ->capture_default_str();
  app.add_option("--decode-base-ms", cfg.replica.engine.decode_base_ms, "each replica: fixed time of an iteration")
      ->capture_default_str();
  app.add_option("--decode-per-seq-ms", cfg.replica.engine.decode_per_seq_ms, "each replica: time per running sequence")
      ->capture_default_str();
  app.add_option("--prefill-ms-per-token", cfg.replica.engine.prefill_ms_per_token,
                 "each replica: time per prompt token admitted")
      ->capture_default_str();
  app.add_option("--seed", cfg.replica.seed, "seed of the replicas' text")->capture_default_str();
}

// The HPA-rule controller.
void add_controller_options(CLI::App& app, FleetConfig& cfg, FlagText& text) {
  app.add_option("--min-replicas", cfg.hpa.min_replicas, "the controller's floor (0: scale to zero)")
      ->capture_default_str();
  app.add_option("--max-replicas", cfg.hpa.max_replicas, "the controller's ceiling")->capture_default_str();
  app.add_option("--metric", text.metric, "what the controller scales on, per ready replica")
      ->check(CLI::IsMember({"in_flight", "waiting", "gpu_util"}))
      ->capture_default_str();
  app.add_option("--target", cfg.hpa.target, "the metric's target per replica")->capture_default_str();
  app.add_option("--tolerance", cfg.hpa.tolerance, "no change while the ratio is this close to 1")
      ->capture_default_str();
  app.add_option("--sync-period-s", text.sync_s, "seconds between the controller's decisions")->capture_default_str();
  app.add_option("--scale-up-window-s", text.up_window_s, "scale-up stabilisation window")->capture_default_str();
  app.add_option("--scale-down-window-s", text.down_window_s, "scale-down stabilisation window")->capture_default_str();
  app.add_option("--idle-to-zero-s", text.idle_s, "with --min-replicas 0: seconds without a request before zero")
      ->capture_default_str();
  app.add_flag("!--no-autoscale", cfg.autoscale, "keep the replica count as set (PUT /fleet?replicas=N)");
}

void apply_flag_text(FleetConfig& cfg, const FlagText& text) {
  auto secs = [](double s) { return std::chrono::milliseconds(static_cast<long>(s * 1000)); };
  cfg.hpa.metric = text.metric == "waiting"    ? Metric::waiting
                   : text.metric == "gpu_util" ? Metric::gpu_util
                                               : Metric::in_flight;
  cfg.hpa.sync_period = secs(text.sync_s);
  cfg.hpa.scale_up_window = secs(text.up_window_s);
  cfg.hpa.scale_down_window = secs(text.down_window_s);
  cfg.hpa.idle_to_zero = secs(text.idle_s);
  cfg.readiness = text.readiness == "lying" ? Readiness::lying : Readiness::honest;
  cfg.termination = text.termination == "abrupt" ? Termination::abrupt : Termination::graceful;
  cfg.routing = text.routing == "least-loaded" ? Routing::least_loaded : Routing::round_robin;
}

// Runs the fleet until SIGINT or SIGTERM.
int serve(const FleetConfig& cfg, const FlagText& text) {
  log::set_program("capsweep-fleetsim");
  boost::asio::io_context io(1);
  Fleet fleet(io, cfg);
  try {
    fleet.start();
  } catch (const std::exception& e) {
    fmt::print(stderr, "capsweep-fleetsim: cannot listen on {}: {}\n", cfg.listen, e.what());
    return 1;
  }
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) fleet.shutdown();
  });
  log::info(fmt::format("serving {} on {}:{} ({} replicas, {} {} target {}, load {} s)", cfg.replica.model,
                        fleet.endpoint().address().to_string(), fleet.endpoint().port(), cfg.initial_replicas,
                        text.readiness, text.metric, cfg.hpa.target, cfg.load_time_s));
  io.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  FleetConfig cfg;
  FlagText text;
  CLI::App app{"capsweep-fleetsim: simulated inference replicas behind one gateway, autoscaled by the HPA rule"};
  add_fleet_options(app, cfg, text);
  add_controller_options(app, cfg, text);
  CLI11_PARSE(app, argc, argv);
  apply_flag_text(cfg, text);
  if (auto v = validate(cfg); !v) {
    fmt::print(stderr, "capsweep-fleetsim: {}: {}\n", v.error().field, v.error().message);
    return 2;
  }
  return serve(cfg, text);
}

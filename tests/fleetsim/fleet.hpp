#pragma once
// capsweep-fleetsim: a fleet of simulated inference replicas behind one gateway port, to
// rehearse scenario jobs (autoscaling, cold start, readiness, scale-down, flapping) on a
// laptop. Each replica is a capsweep-llmsim server (its own engine, on a thread of its own,
// on a loopback port); the gateway routes each completion request to a ready replica
// (round-robin or least-loaded), relays its answer as it streams, and runs the controller
// (the HPA rule, controller.hpp) on a metric of its choice. Defects are flags: a replica that
// reports ready while it is still loading (it takes requests and holds them), and one that is
// cut off at once on scale-down instead of draining its streams.
//
// /metrics: the replicas' vLLM gauges with a `replica` label, fleet_replicas_{desired,ready,
// current}, kube-state-metrics names (kube_deployment_spec_replicas,
// kube_deployment_status_replicas_ready, kube_deployment_status_replicas{deployment=}) so the
// same PromQL works here and against a cluster, per-replica in-flight requests and a simulated
// GPU utilisation (DCGM_FI_DEV_GPU_UTIL) that saturates long before the replica does.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>

#include "fleetsim/controller.hpp"
#include "llmsim/config.hpp"

namespace capsweep::fleetsim {

enum class Readiness { honest, lying };  // lying: ready as soon as the process starts
enum class Termination { graceful, abrupt };
enum class Routing { round_robin, least_loaded };

struct FleetConfig {
  std::string listen = "127.0.0.1:9000";
  std::string deployment = "llm";  // the kube_* series' deployment label
  llmsim::SimConfig replica;       // each replica's engine and model (listen and load time set here)
  double load_time_s = 0;          // a new replica's cold start
  Readiness readiness = Readiness::honest;
  Termination termination = Termination::graceful;
  double grace_s = 30;  // graceful: how long a leaving replica may finish its streams
  Routing routing = Routing::round_robin;
  int initial_replicas = 1;
  HpaSettings hpa;
  bool autoscale = true;                // false: the replica count stays as set (or as PUT /fleet/replicas sets it)
  double gpu_saturation_in_flight = 4;  // simulated GPU utilisation reaches 100% at this many in flight
  double queue_timeout_s = 300;         // how long a request waits for a ready replica before 503
};

// Checks ranges; errors name the setting ("/max_replicas", ...).
Result<FleetConfig> validate(const FleetConfig& cfg);

class Fleet {
 public:
  // Runs on `io` (one thread); the replicas run on threads of their own.
  Fleet(boost::asio::io_context& io, FleetConfig cfg);
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // Binds the gateway, starts the initial replicas and the controller.
  void start();
  boost::asio::ip::tcp::endpoint endpoint() const;
  // Stops the gateway and every replica, then stops `io`.
  void shutdown();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace capsweep::fleetsim

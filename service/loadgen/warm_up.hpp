#pragma once
// A warm prefix cache (workload.prefix.cache "warm"): before a step, each shared prefix is
// sent once, unmeasured, so that the target holds it when the step's first request comes.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loadgen/endpoint.hpp"

namespace capsweep::llm {
struct Target;
}

namespace capsweep::loadgen {

// What the warm-up sent: its requests, how many failed, and how long it took.
struct WarmUp {
  std::uint64_t sent = 0, failed = 0;
  double seconds = 0;
};

// Sends every prompt once (one token asked, kWarmUpInFlight at a time) through an endpoint of
// its own on the calling thread and waits for every answer. `stop` is asked before each
// request: once it says true, nothing more is sent.
inline constexpr std::size_t kWarmUpInFlight = 16;
WarmUp warm_up(const llm::Target& target, const EndpointFactory& make_endpoint, const std::vector<std::string>& prompts,
               const std::function<bool()>& stop);

}  // namespace capsweep::loadgen

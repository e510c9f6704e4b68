#pragma once
// capsweep-agent: a load agent. It dials capsweepd (pull: capsweepd never looks for it),
// registers with its run id, index and epoch, and for each step it is offered: estimates its
// clock offset to capsweepd (four-timestamp exchanges, the smallest round trip kept), makes
// the step's engine settings as capsweepd does and acknowledges the schedule's digest, waits
// for go {t0}, converts t0 once to its own steady clock and sends its share (the requests
// j ≡ index mod agents), with a heartbeat every second and its raw records in batches. It
// exits 0 when its run is done, 2 when its token or epoch is refused, 1 when capsweepd cannot
// be reached for `give_up`.

#include <chrono>
#include <cstdint>
#include <string>

#include "api_client.hpp"

namespace capsweep::agent {

struct AgentOptions {
  cli::ServerUrl server;
  std::string token;
  std::string run;
  std::uint32_t index = 0;
  std::uint64_t epoch = 0;
  std::chrono::milliseconds give_up{600'000};  // capsweepd unreachable, or no step, this long
  std::chrono::milliseconds poll{50};
  int clock_exchanges = 16;
};

// Runs the agent to its end; the process's exit code.
int run_agent(const AgentOptions& options);

}  // namespace capsweep::agent

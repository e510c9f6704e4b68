#pragma once
// Targets and workloads the integration tests and benchmarks point at capsweep-llmsim.

#include <chrono>
#include <cstdint>
#include <memory>

#include "llm/target.hpp"
#include "llm/workload.hpp"

namespace capsweep::testing {

// The simulator's model on 127.0.0.1:port.
inline llm::Target loopback_target(std::uint16_t port, bool stream = true,
                                   Nanos read_timeout = std::chrono::seconds(10)) {
  llm::Target t;
  t.host = "127.0.0.1";
  t.port = port;
  t.model = "sim-8b";
  t.stream = stream;
  t.read_timeout = read_timeout;
  return t;
}

// Fixed prompt and output lengths, one token per word (the simulator's tokenizer).
inline std::shared_ptr<const llm::Workload> fixed_workload(std::uint32_t prompt, std::uint32_t output) {
  llm::WorkloadSpec w;
  w.prompt_tokens = LengthDist::fixed(prompt);
  w.output_tokens = LengthDist::fixed(output);
  w.seed = 1;
  return std::make_shared<llm::Workload>(w, llm::PromptSynth(1.0));
}

}  // namespace capsweep::testing

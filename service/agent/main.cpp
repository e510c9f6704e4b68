// capsweep-agent: a load agent of capsweepd (agent/agent.hpp). Usage:
//   capsweep-agent --server http://capsweepd:8080 --run ID [--index N] [--epoch E]
//                  [--token-file F]     (token: CAPSWEEP_AGENT_TOKEN, else the file)
// The index defaults to $JOB_COMPLETION_INDEX (a Kubernetes Indexed Job's), the epoch to the
// time the agent started (ns since 1970: a replacement pod's is newer).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "agent/agent.hpp"

int main(int argc, char** argv) {
  CLI::App app{"capsweep-agent: sends its share of a capsweepd job's steps"};
  std::string server, run, token_file;
  long long index = -1;
  unsigned long long epoch = 0;
  double give_up_s = 600;
  app.add_option("--server", server, "capsweepd's URL (http://host:port)")->required();
  app.add_option("--run", run, "the job's id (its run)")->required();
  app.add_option("--index", index, "this agent's index (default: $JOB_COMPLETION_INDEX)");
  app.add_option("--epoch", epoch, "this agent's epoch (default: its start time in ns)");
  app.add_option("--token-file", token_file, "a file holding the agent token (default: $CAPSWEEP_AGENT_TOKEN)");
  app.add_option("--give-up-s", give_up_s, "exit 1 after this long without capsweepd or a step")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  capsweep::agent::AgentOptions o;
  std::string error;
  auto url = capsweep::cli::parse_server_url(server, error);
  if (!url) {
    std::cerr << "capsweep-agent: --server: " << error << "\n";
    return 2;
  }
  o.server = *url;
  o.run = run;
  if (index < 0) {
    const char* env = std::getenv("JOB_COMPLETION_INDEX");
    if (env == nullptr) {
      std::cerr << "capsweep-agent: no --index and no JOB_COMPLETION_INDEX\n";
      return 2;
    }
    index = std::atoll(env);
  }
  if (index < 0 || index > 4095) {
    std::cerr << "capsweep-agent: the index must be from 0 to 4095\n";
    return 2;
  }
  o.index = static_cast<std::uint32_t>(index);
  o.epoch = epoch != 0 ? epoch
                       : static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                        std::chrono::system_clock::now().time_since_epoch())
                                                        .count());
  if (const char* env = std::getenv("CAPSWEEP_AGENT_TOKEN"); env != nullptr && *env != '\0') {
    o.token = env;
  } else if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) {
      std::cerr << "capsweep-agent: cannot read " << token_file << "\n";
      return 2;
    }
    std::getline(in, o.token);
  }
  o.give_up = std::chrono::milliseconds(static_cast<long long>(give_up_s * 1000));
  return capsweep::agent::run_agent(o);
}

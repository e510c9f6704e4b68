// capsweep-bench-loadgen: what one generator thread of capsweep's load engine can do against
// capsweep-llmsim (a separate process pinned to CPU 0; the generator runs on CPU 1):
//  (a) the highest Poisson rate at which schedule lag p99 stays <= 1 ms, with short streams;
//  (b) streamed token events per second consumed, 16 events per segment and 1 per segment,
//      the latter beside a minimal epoll reader in the same run;
//  (c) memory per in-flight stream with 5,000 concurrent streams;
//  (d) non-streaming requests per second beside wrk on the same endpoint;
//  (e) the highest Poisson rate held at K = 1 and K = 2 engine threads, against a fast SSE server.
//
//  (f) token events per CPU-second of the client process, beside vLLM's Python client loop
//      (tests/bench/python_client.py), 2,000 streams of 256 tokens all at once;
//  (g) schedule lag at 10,000 Poisson req/s with 16-token answers, at K = 1 and K = 2.
//
// Usage: capsweep-bench-loadgen [--quick] [--parts abcdefg]

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/fast_sse_server.hpp"
#include "bench/stream_reader.hpp"
#include "loadgen/step_runner.hpp"
#include "support/llm_fixtures.hpp"

using namespace capsweep;
using namespace std::chrono_literals;

namespace {

std::uint16_t free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// capsweep-llmsim as a child process on CPU 0 (pinned), or wherever the kernel puts it.
class Sim {
 public:
  explicit Sim(std::vector<std::string> args, bool pinned = true) : port_(free_port()) {
    args.insert(args.begin(), {CAPSWEEP_LLMSIM_PATH, "--listen", fmt::format("127.0.0.1:{}", port_)});
    pid_ = fork();
    if (pid_ == 0) {
      if (pinned) bench::pin_to_cpu(0);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    // Wait until it answers.
    for (int i = 0; i < 200; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(port_);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      const bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      close(fd);
      if (up) return;
      std::this_thread::sleep_for(10ms);
    }
    throw std::runtime_error("capsweep-llmsim did not start");
  }
  ~Sim() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  std::uint16_t port() const { return port_; }

 private:
  std::uint16_t port_;
  pid_t pid_ = -1;
};

llm::Target target(std::uint16_t port, bool stream = true) {
  return testing::loopback_target(port, stream, 30s);
}

std::shared_ptr<const llm::Workload> workload(std::uint32_t prompt, std::uint32_t output) {
  return testing::fixed_workload(prompt, output);
}

std::size_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoul(line.substr(6));
  }
  return 0;
}

void part_a(bool quick) {
  fmt::print("(a) schedule lag under Poisson load, 4-token streams\n");
  Sim sim(
      {"--max-num-seqs", "4096", "--decode-base-ms", "2", "--decode-per-seq-ms", "0", "--prefill-ms-per-token", "0"});
  fmt::print("    {:>9} {:>10} {:>12} {:>12} {:>10} {:>8}\n", "rate/s", "achieved", "lag p50 ms", "lag p99 ms",
             "gen CPU", "errors");
  double best = 0;
  bool best_open = true;
  for (double rate : {250.0, 500.0, 1000.0, 2000.0, 4000.0, 6000.0, 8000.0}) {
    loadgen::StepRunner runner(target(sim.port()), workload(16, 4));
    loadgen::StepSpec s;
    s.arrival = {ArrivalProcess::poisson, rate, 1};
    s.duration = quick ? 1s : 4s;
    s.drain_timeout = 10s;
    auto r = runner.run(s).value();
    const double p99 = r.metrics.schedule_lag_ms.percentile(99);
    fmt::print("    {:>9.0f} {:>10.1f} {:>12.3f} {:>12.3f} {:>9.0f}% {:>8}\n", rate, r.metrics.achieved_rate_rps(),
               r.metrics.schedule_lag_ms.percentile(50), p99, 100 * r.generator_cpu, r.metrics.failed());
    if (p99 <= 1.0 && r.metrics.failed() == 0 && best_open)
      best = rate;
    else
      best_open = false;  // the highest rate below which every rate held
  }
  fmt::print("    highest rate with lag p99 <= 1 ms at it and every lower rate: {:.0f} req/s\n\n", best);
}

void part_b(bool quick) {
  fmt::print("(b) streamed token events consumed by one generator thread\n");
  const int streams = quick ? 50 : 500;
  for (int per_write : {16, 1}) {
    // Paced well above what a reader takes: 500 streams x 1 token per 0.25 ms iteration.
    Sim sim({"--max-num-seqs", "8192", "--kv-cache-tokens", "100000000", "--max-model-len", "200000",
             "--decode-base-ms", per_write == 16 ? "0.25" : "2", "--decode-per-seq-ms", "0", "--prefill-ms-per-token",
             "0", "--events-per-write", std::to_string(per_write)});
    loadgen::StepRunner runner(target(sim.port()), workload(8, 30000));
    loadgen::StepSpec s;
    s.mode = loadgen::Mode::concurrency;
    s.concurrency = static_cast<std::uint32_t>(streams);
    s.duration = quick ? 2s : 5s;
    s.warmup = 1s;
    s.drain_timeout = 1s;
    auto r = runner.run(s).value();
    fmt::print("    capsweep, {:>2} events/segment: {:>10.0f} events/s (generator CPU {:.0f}%)\n", per_write,
               r.metrics.output_throughput(), 100 * r.generator_cpu);
    if (per_write == 1) {
      bench::StreamReader reader(
          sim.port(), streams,
          fmt::format("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      "Content-Length: {}\r\n\r\n{}",
                      std::string(R"({"model":"sim-8b","prompt":"w","max_tokens":100000,"stream":true})").size(),
                      R"({"model":"sim-8b","prompt":"w","max_tokens":100000,"stream":true})"));
      reader.read_for(1s);
      const auto events = reader.read_for(quick ? 1s : 4s);
      fmt::print("    minimal epoll reader, 1 event/segment: {:>10.0f} events/s\n", events / (quick ? 1.0 : 4.0));
    }
  }
  fmt::print("\n");
}

void part_c(bool quick) {
  const int streams = quick ? 200 : 5000;
  fmt::print("(c) memory per in-flight stream, {} concurrent streams\n", streams);
  Sim sim({"--max-num-seqs", "10000", "--kv-cache-tokens", "100000000", "--decode-base-ms", "200",
           "--decode-per-seq-ms", "0", "--prefill-ms-per-token", "0"});
  const std::size_t before = rss_kib();
  std::size_t during = 0;
  loadgen::StepRunner runner(target(sim.port()), workload(8, 40));
  std::thread watch([&] {
    for (int i = 0; i < 60; ++i) {
      std::this_thread::sleep_for(100ms);
      if (runner.progress().in_flight.load() >= static_cast<std::uint64_t>(streams) * 9 / 10)
        during = std::max(during, rss_kib());
    }
  });
  loadgen::StepSpec s;
  s.arrival = {ArrivalProcess::all_at_once, 0, 1};
  s.requests = static_cast<std::uint64_t>(streams);
  s.duration = 1s;
  s.drain_timeout = 30s;
  auto r = runner.run(s).value();
  watch.join();
  fmt::print("    peak in flight {}, RSS before {} KiB, during {} KiB: {:.1f} KiB per stream (completed {})\n\n",
             r.peak_in_flight, before, during, during > before ? static_cast<double>(during - before) / streams : 0.0,
             r.metrics.completed);
}

void part_d(bool quick) {
  fmt::print("(d) non-streaming requests/s, 64 connections, 8-token answers\n");
  Sim sim(
      {"--max-num-seqs", "256", "--decode-base-ms", "0", "--decode-per-seq-ms", "0", "--prefill-ms-per-token", "0"});
  const std::string body = R"({"model":"sim-8b","prompt":"a b c d","max_tokens":8})";
  const std::string lua = "bench-wrk.lua";
  std::ofstream(lua) << "wrk.method = \"POST\"\nwrk.body = '" << body
                     << "'\nwrk.headers[\"Content-Type\"] = \"application/json\"\n";
  double wrk_rps = 0;
  const std::string cmd = fmt::format("taskset -c 1 wrk -t1 -c64 -d{}s -s {} http://127.0.0.1:{}/v1/completions 2>&1",
                                      quick ? 1 : 4, lua, sim.port());
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char line[512];
    while (fgets(line, sizeof line, p)) {
      if (std::strncmp(line, "Requests/sec:", 13) == 0) wrk_rps = std::atof(line + 13);
    }
    pclose(p);
  }
  std::remove(lua.c_str());
  loadgen::StepRunner runner(target(sim.port(), false), workload(4, 8));
  loadgen::StepSpec s;
  s.mode = loadgen::Mode::concurrency;
  s.concurrency = 64;
  s.duration = quick ? 2s : 5s;
  s.warmup = 1s;
  auto r = runner.run(s).value();
  const double ours = r.metrics.request_throughput();
  fmt::print("    wrk: {:.0f} req/s; capsweep (recording every request): {:.0f} req/s; ratio {:.2f}\n", wrk_rps, ours,
             wrk_rps > 0 ? ours / wrk_rps : 0.0);
}

// One Poisson step of 16-token prompts and `tokens`-token answers at `rate` on `k` engine
// parts, after a warm-up (1 s; 200 ms quick).
loadgen::StepResult poisson_step(std::uint16_t port, double rate, std::uint32_t tokens, std::uint32_t k,
                                 std::chrono::seconds duration, bool quick) {
  loadgen::StepRunner runner(target(port), workload(16, tokens));
  loadgen::StepSpec s;
  s.arrival = {ArrivalProcess::poisson, rate, 1};
  s.duration = duration;
  s.warmup = quick ? 200ms : 1s;
  s.drain_timeout = 10s;
  s.engine_threads = k;
  return runner.run(s).value();
}

// (e): the highest rate each engine width holds, measured side by side in one run. Nothing is
// pinned: the server and every generator thread share the machine's cores as they would.
void part_e(bool quick) {
  fmt::print(
      "(e) engine threads: Poisson rates at K = 1 and K = 2 parts against a fast SSE server (4 tokens in "
      "one write per answer), nothing pinned\n");
  bench::unpin();
  bench::FastSseServer sim;
  fmt::print("    {:>2} {:>9} {:>10} {:>12} {:>12} {:>12} {:>14} {:>8}\n", "K", "rate/s", "achieved", "lag p50 ms",
             "lag p99 ms", "busiest CPU", "events/CPU-s", "errors");
  double ceiling[3] = {0, 0, 0};
  for (std::uint32_t k : {1u, 2u}) {
    bool open = true;
    for (double rate : {8000.0, 16000.0, 24000.0, 32000.0, 40000.0, 48000.0, 56000.0, 64000.0}) {
      const auto r = poisson_step(sim.port(), rate, 4, k, quick ? 1s : 4s, quick);
      const double p99 = r.metrics.schedule_lag_ms.percentile(99);
      const auto events = static_cast<double>(r.metrics.output_tokens_in_window);
      std::string worst;  // the commonest failure, when there are failures
      std::uint64_t most = 0;
      for (std::size_t o = 1; o < kOutcomeCount; ++o) {
        if (r.metrics.outcomes[o] > most) {
          most = r.metrics.outcomes[o];
          worst = fmt::format(" ({})", to_string(static_cast<Outcome>(o)));
        }
      }
      fmt::print("    {:>2} {:>9.0f} {:>10.1f} {:>12.3f} {:>12.3f} {:>11.0f}% {:>14.0f} {:>8}{}\n", r.engine_parts,
                 rate, r.metrics.achieved_rate_rps(), r.metrics.schedule_lag_ms.percentile(50), p99,
                 100 * r.generator_cpu, r.generator_cpu_s > 0 ? events / r.generator_cpu_s : 0.0, r.metrics.failed(),
                 worst);
      const bool held = p99 <= 1.0 && r.metrics.failed() == 0 && r.metrics.achieved_rate_rps() >= 0.95 * rate;
      if (held && open)
        ceiling[k] = rate;
      else
        open = false;
      if (!held && quick) break;
    }
  }
  fmt::print(
      "    highest rate with lag p99 <= 1 ms, no error and achieved >= 95% of offered, at it and every lower "
      "rate: K = 1 {:.0f} req/s, K = 2 {:.0f} req/s (ratio {:.2f})\n\n",
      ceiling[1], ceiling[2], ceiling[1] > 0 ? ceiling[2] / ceiling[1] : 0.0);
}

double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct ClientRun {
  double events = 0, cpu_s = 0, wall_s = 0;
  std::uint64_t completed = 0;
  double per_cpu_s() const { return cpu_s > 0 ? events / cpu_s : 0.0; }
};

// capsweep's engine: `requests` streams of `tokens` all at once; this process's CPU seconds
// (every thread) while the step runs.
ClientRun capsweep_client(std::uint16_t port, std::uint32_t requests, std::uint32_t tokens) {
  loadgen::StepRunner runner(target(port), workload(16, tokens));
  loadgen::StepSpec s;
  s.arrival = {ArrivalProcess::all_at_once, 0, 1};
  s.requests = requests;
  s.duration = 1s;
  s.drain_timeout = 120s;
  const double cpu0 = process_cpu_s();
  const auto wall0 = std::chrono::steady_clock::now();
  auto r = runner.run(s).value();
  ClientRun out;
  out.cpu_s = process_cpu_s() - cpu0;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  out.events = static_cast<double>(r.metrics.output_tokens_in_window);
  out.completed = r.metrics.completed;
  return out;
}

// The Python client (tests/bench/python_client.py) under Debian's python3 with aiohttp; its
// own CPU seconds after its imports. Empty when it could not run.
std::optional<ClientRun> python_client(std::uint16_t port, std::uint32_t requests, std::uint32_t tokens) {
  const std::string cmd = fmt::format("/usr/bin/python3 {}/python_client.py {} {} {} 2>/dev/null", CAPSWEEP_BENCH_DIR,
                                      port, requests, tokens);
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char line[512];
    while (fgets(line, sizeof line, p)) out += line;
    pclose(p);
  }
  const auto j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  return ClientRun{j.value("events", 0.0), j.value("cpu_s", 0.0), j.value("wall_s", 0.0),
                   j.value("completed", std::uint64_t{0})};
}

// (f): CPU per streamed token against vLLM's Python client's loop, the same answers from the
// same server, the two clients alternating (three runs each); nothing pinned. Two servers:
// one that paces every stream (a token every `pace`), and one that writes each answer's events
// back to back as fast as it can.
void part_f(bool quick, std::chrono::milliseconds pace) {
  const std::uint32_t requests = quick ? 100 : 2000, tokens = quick ? 32 : 256;
  fmt::print("(f) {} requests x {} tokens all at once; CPU seconds of the client process, events per CPU-second\n",
             requests, tokens);
  bench::unpin();
  for (const bool paced : {true, false}) {
    fmt::print("    server: {}\n",
               paced ? fmt::format("every stream's next event every {} ms, each its own write "
                                   "and chunk",
                                   pace.count())
                     : std::string("each answer's events back to back, each its own write and chunk"));
    bench::FastSseServer sim({tokens, paced ? std::chrono::microseconds(pace) : 0us, true});
    std::vector<double> ours, theirs;
    for (int run = 0; run < (quick ? 1 : 3); ++run) {
      const ClientRun c = capsweep_client(sim.port(), requests, tokens);
      fmt::print("      capsweep engine: {:>8.0f} events, {} completed, {:.2f} CPU-s, {:.2f} s: {:>9.0f}\n", c.events,
                 c.completed, c.cpu_s, c.wall_s, c.per_cpu_s());
      ours.push_back(c.per_cpu_s());
      const auto py = python_client(sim.port(), requests, tokens);
      if (!py) {
        fmt::print("      Python client: not run (/usr/bin/python3 with aiohttp is needed)\n");
        continue;
      }
      fmt::print("      Python client:   {:>8.0f} events, {} completed, {:.2f} CPU-s, {:.2f} s: {:>9.0f}\n", py->events,
                 py->completed, py->cpu_s, py->wall_s, py->per_cpu_s());
      theirs.push_back(py->per_cpu_s());
    }
    std::sort(ours.begin(), ours.end());
    std::sort(theirs.begin(), theirs.end());
    if (!theirs.empty() && theirs[theirs.size() / 2] > 0)
      fmt::print("      medians: capsweep {:.0f}, Python {:.0f} events/CPU-s: ratio {:.2f}\n", ours[ours.size() / 2],
                 theirs[theirs.size() / 2], ours[ours.size() / 2] / theirs[theirs.size() / 2]);
  }
  fmt::print("\n");
}

// (g): schedule lag of a Poisson step at 10,000 req/s with 16-token prompts and answers, at
// K = 1 and K = 2 engine parts alternating, three runs each; the server shares the cores.
void part_g(bool quick) {
  const double rate = quick ? 2000 : 10000;
  fmt::print("(g) Poisson {:.0f} req/s, 16-token prompts and answers (one write per answer), nothing pinned\n", rate);
  bench::unpin();
  bench::FastSseServer sim({16, 0us});
  fmt::print("    {:>2} {:>10} {:>12} {:>12} {:>12} {:>12} {:>14} {:>8}\n", "K", "achieved", "lag p50 ms", "lag p99 ms",
             "lag max ms", "busiest CPU", "events/CPU-s", "errors");
  for (int run = 0; run < (quick ? 1 : 3); ++run) {
    for (std::uint32_t k : {1u, 2u}) {
      const auto r = poisson_step(sim.port(), rate, 16, k, quick ? 1s : 5s, quick);
      const auto events = static_cast<double>(r.metrics.output_tokens_in_window);
      fmt::print("    {:>2} {:>10.1f} {:>12.3f} {:>12.3f} {:>12.3f} {:>11.0f}% {:>14.0f} {:>8}\n", r.engine_parts,
                 r.metrics.achieved_rate_rps(), r.metrics.schedule_lag_ms.percentile(50),
                 r.metrics.schedule_lag_ms.percentile(99), r.metrics.schedule_lag_ms.max(), 100 * r.generator_cpu,
                 r.generator_cpu_s > 0 ? events / r.generator_cpu_s : 0.0, r.metrics.failed());
    }
  }
  fmt::print("\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int pace_ms = 20;
  std::string parts = "abcdefg";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--parts") == 0 && i + 1 < argc) parts = argv[++i];
    if (std::strcmp(argv[i], "--pace-ms") == 0 && i + 1 < argc) pace_ms = std::atoi(argv[++i]);
  }
  bench::raise_fd_limit();
  bench::pin_to_cpu(1);
  if (parts.find('a') != std::string::npos) part_a(quick);
  if (parts.find('b') != std::string::npos) part_b(quick);
  if (parts.find('c') != std::string::npos) part_c(quick);
  if (parts.find('d') != std::string::npos) part_d(quick);
  if (parts.find('e') != std::string::npos) part_e(quick);
  if (parts.find('f') != std::string::npos) part_f(quick, std::chrono::milliseconds(pace_ms));
  if (parts.find('g') != std::string::npos) part_g(quick);
  return 0;
}

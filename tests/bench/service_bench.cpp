// capsweep-bench-service: capsweepd as operators run it, measured from outside.
//  (a) schedule lag of a running step with and without 200 API pollers (each polling
//      GET /v1/sweeps/{id} twice a second), side by side in one run: quiet, polled, quiet
//      again, so the two quiet runs show the noise the polled one is compared with;
//  (b) capsweepd's resident memory over a long run of identical fixed-rate steps: after the
//      first step and after the last (growth in percent);
//  (c) the same over one long sweep (baseline, probe, a ladder of ever higher rates and its
//      refinement), sampled each time a step is stored;
//  (d) the same over one long scenario job at a fixed rate (one step, windows stored as they
//      close), sampled every minute while it runs: flat when a window costs what its
//      requests cost and nothing of a closed window is kept.
//  (e) 300 dashboard pollers from one address, each on a keep-alive connection of its own,
//      polling GET /v1/sweeps/{id} every 0.3 s during a 200 req/s check (over the per-client
//      cap of 128): polls answered (200, or 503 with Retry-After, after which the poller waits
//      as told and reconnects), polls dropped (a connection closed under a request), and the
//      check's schedule lag p99 beside the same check without pollers, in one run.
//  (f) one sweep spec run twice on the same simulator, its fixed-rate steps of fixed length
//      and then stopped when decided (step.stop "decided"): the sweep's wall time, its steps
//      and measured requests, and the answer (max SLO rate and its bracket) side by side; on
//      llmsim's default model (~36 req/s, TTFT p95 and ITL p95 bounds) and on a slow one
//      (two sequences, 3.1 s a request: ~0.64 req/s, p50 bounds).
//  (g) capsweepd's engine at 10,000 Poisson req/s (16-token answers from a fast SSE server):
//      schedule lag p50/p99/max of each check and capsweepd's CPU per token event.
//  (h) time to a verdict: today's default sweep (the ladder of 60-s steps) against the scouting
//      search (sweep.search "scout") on the same spec and seed, three runs each, on llmsim's
//      default model with two SLOs (its saturation limits; an ITL bound limits below it), all
//      twelve sweeps side by side, each with its own simulator and capsweepd: wall time, steps,
//      measured requests, answer and bracket, and whether each scouting answer lies in the
//      trial band the ladder runs give and below every rate seen to saturate.
// capsweep-llmsim and capsweepd run as child processes on loopback.
//
// Usage: capsweep-bench-service [--quick] [--parts abcdefgh] [--rate R] [--seconds S] [--minutes M]
//                               [--scenario-rate R]

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/fast_sse_server.hpp"
#include "support/http_client.hpp"

using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::uint16_t free_port() {
  return free_loopback_port();
}

boost::asio::ip::tcp::endpoint loopback(std::uint16_t port) {
  return {boost::asio::ip::make_address("127.0.0.1"), port};
}

// A child process, killed on destruction.
class Child {
 public:
  // `health`: the path that answers 200 once the child serves.
  Child(std::vector<std::string> argv, const fs::path& log, std::uint16_t port, const std::string& health)
      : port_(port) {
    // The arguments are made before fork: a child of a threaded process must not allocate.
    std::vector<char*> raw;
    for (auto& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execv(raw[0], raw.data());
      _exit(127);
    }
    for (int i = 0; i < 500; ++i) {
      if (http_request(loopback(port_), "GET", health, "", 200ms).status == 200) return;
      std::this_thread::sleep_for(10ms);
    }
    throw std::runtime_error("a child did not start: " + argv[0]);
  }
  ~Child() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }
  std::uint16_t port() const { return port_; }

 private:
  std::uint16_t port_;
  pid_t pid_ = -1;
};

// A field of /proc/PID/status in KiB ("VmRSS", "RssAnon", "RssFile"); 0 when absent.
std::size_t status_kib(pid_t pid, const std::string& field) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoul(line.substr(field.size() + 1));
  }
  return 0;
}

std::size_t rss_kib(pid_t pid) {
  return status_kib(pid, "VmRSS");
}

// A GET as a patient client makes it: a 503 with Retry-After is waited out (the bench's own
// requests share the pollers' address and so their per-client cap).
json get_json(std::uint16_t port, const std::string& path) {
  for (int tries = 0; tries < 30; ++tries) {
    auto r = http_request(loopback(port), "GET", path);
    if (r.status == 200) return json::parse(r.body, nullptr, false);
    if (r.status != 503 || !r.headers.count("retry-after")) break;
    std::this_thread::sleep_for(1s);
  }
  return json::object();
}

std::string submit(std::uint16_t port, const json& spec) {
  auto r = http_request(loopback(port), "POST", "/v1/sweeps", spec.dump());
  if (r.status != 201) throw std::runtime_error("submit failed: " + r.body);
  return json::parse(r.body)["id"].get<std::string>();
}

json wait_done(std::uint16_t port, const std::string& id, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  json v;
  while (std::chrono::steady_clock::now() < end) {
    v = get_json(port, "/v1/sweeps/" + id);
    if (v.is_object() && v.contains("status") && v["status"] != "queued" && v["status"] != "running") return v;
    std::this_thread::sleep_for(200ms);
  }
  return v;
}

json job(std::uint16_t sim_port, const std::string& name) {
  const std::string base = fmt::format("http://127.0.0.1:{}", sim_port);
  return {
      {"name", name},
      {"target", {{"base_url", base}, {"model", "sim-8b"}, {"metrics_url", base + "/metrics"}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 200}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 64}}}}},
      {"slo", {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}}};
}

struct LagRun {
  double p50 = 0, p99 = 0, max = 0, achieved = 0;
  int polls = 0, poll_errors = 0;
  double poll_p99_ms = 0;
};

// Submits a check of `rate` for `seconds` and waits until it runs; its id.
std::string start_check(std::uint16_t api, std::uint16_t sim, double rate, double seconds, const std::string& name) {
  json spec = job(sim, name);
  spec["kind"] = "check";
  spec["check"] = {{"rate_rps", rate}, {"duration_s", seconds}, {"warmup_s", 1}};
  const std::string id = submit(api, spec);
  while (get_json(api, "/v1/sweeps/" + id)["status"] == "queued") std::this_thread::sleep_for(50ms);
  return id;
}

LagRun run_check(std::uint16_t api, std::uint16_t sim, double rate, double seconds, int pollers) {
  const std::string id = start_check(api, sim, rate, seconds, pollers ? "polled" : "quiet");
  std::atomic<bool> stop{false};
  std::atomic<int> polls{0}, errors{0};
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(pollers));
  std::vector<std::thread> threads;
  for (int p = 0; p < pollers; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(static_cast<unsigned>(p));
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 500));
      while (!stop) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = http_request(loopback(api), "GET", "/v1/sweeps/" + id);
        latencies[static_cast<std::size_t>(p)].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        (r.status == 200 ? polls : errors)++;
        std::this_thread::sleep_for(500ms);
      }
    });
  }
  const json done = wait_done(api, id, std::chrono::seconds(static_cast<long>(seconds) + 120));
  stop = true;
  for (auto& t : threads) t.join();
  LagRun out;
  const json steps = get_json(api, "/v1/sweeps/" + id + "/steps")["steps"];
  if (steps.is_array() && !steps.empty()) {
    const json& s = steps[0]["summary"];
    out.p50 = s.value("p50_schedule_lag_ms", 0.0);
    out.p99 = s.value("p99_schedule_lag_ms", 0.0);
    out.max = s.value("max_schedule_lag_ms", 0.0);
    out.achieved = s.value("achieved_rate_rps", 0.0);
  }
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  out.polls = polls;
  out.poll_errors = errors;
  out.poll_p99_ms = all.empty() ? 0 : all[static_cast<std::size_t>(0.99 * static_cast<double>(all.size() - 1))];
  if (done["status"] != "succeeded") fmt::print("    (job ended {})\n", done.value("status", "?"));
  return out;
}

void part_a(const fs::path& dir, double rate, double seconds) {
  fmt::print("(a) schedule lag of a {:.0f} req/s check, {:.0f} s, without and with 200 API pollers\n", rate, seconds);
  const std::uint16_t sp = free_port(), ap = free_port();
  Child sim({CAPSWEEP_LLMSIM_PATH, "--listen", fmt::format("127.0.0.1:{}", sp)}, dir / "sim.log", sp, "/health");
  Child d({CAPSWEEPD_PATH, "--listen", fmt::format("127.0.0.1:{}", ap), "--db", (dir / "a.db").string()}, dir / "a.log",
          ap, "/healthz");
  fmt::print("    {:<8} {:>12} {:>12} {:>12} {:>10} {:>8} {:>8} {:>13}\n", "run", "lag p50 ms", "lag p99 ms",
             "lag max ms", "achieved", "polls", "errors", "poll p99 ms");
  std::vector<LagRun> runs;
  for (int pollers : {0, 200, 0}) {
    const LagRun r = run_check(ap, sp, rate, seconds, pollers);
    runs.push_back(r);
    fmt::print("    {:<8} {:>12.3f} {:>12.3f} {:>12.3f} {:>10.2f} {:>8} {:>8} {:>13.1f}\n",
               pollers ? "polled" : "quiet", r.p50, r.p99, r.max, r.achieved, r.polls, r.poll_errors, r.poll_p99_ms);
  }
  const double quiet_lo = std::min(runs[0].p99, runs[2].p99), quiet_hi = std::max(runs[0].p99, runs[2].p99);
  fmt::print("    lag p99: quiet runs {:.3f}..{:.3f} ms, polled {:.3f} ms (ratio to the quiet mean {:.2f})\n", quiet_lo,
             quiet_hi, runs[1].p99, runs[1].p99 / std::max(1e-9, (quiet_lo + quiet_hi) / 2));
  fmt::print("    capsweepd alive after: {}\n",
             http_request(loopback(ap), "GET", "/healthz").status == 200 ? "yes" : "NO");
}

// One poller's keep-alive connection: GETs on it, a new connection after the server closes it.
class KeepAlive {
 public:
  enum class Answer { ok, busy, dropped, other };
  explicit KeepAlive(std::uint16_t port) : ep_(loopback(port)) {}
  // One GET. busy: 503 with Retry-After (its seconds in `retry_after_s`); dropped: the
  // connection failed after the request was written, with no answer.
  Answer get(const std::string& target, int& retry_after_s) {
    boost::system::error_code ec;
    if (!socket_.is_open()) {
      socket_.connect(ep_, ec);
      if (ec) {
        socket_.close(ec);
        return Answer::dropped;
      }
      const timeval tv{5, 0};
      setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    const std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    boost::asio::write(socket_, boost::asio::buffer(req), ec);
    std::string in;
    std::size_t header_end = std::string::npos, need = 0;
    char buf[8192];
    while (!ec) {
      const std::size_t n = socket_.read_some(boost::asio::buffer(buf), ec);
      in.append(buf, n);
      if (header_end == std::string::npos && (header_end = in.find("\r\n\r\n")) != std::string::npos) {
        std::string lower = in.substr(0, header_end);
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
        const auto cl = lower.find("content-length:");
        need = header_end + 4 + (cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 15)));
        retry_after_s = lower.find("retry-after:") == std::string::npos
                            ? -1
                            : std::atoi(lower.c_str() + lower.find("retry-after:") + 12);
        close_after_ = lower.find("connection: close") != std::string::npos;
      }
      if (header_end != std::string::npos && in.size() >= need) break;
    }
    if (header_end == std::string::npos || in.size() < need) {
      socket_.close(ec);
      return Answer::dropped;
    }
    const int status = std::atoi(in.c_str() + 9);
    if (close_after_) socket_.close(ec);
    if (status == 200) return Answer::ok;
    if (status == 503 && retry_after_s >= 0) return Answer::busy;
    return Answer::other;
  }

 private:
  boost::asio::ip::tcp::endpoint ep_;
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_{io_};
  bool close_after_ = false;
};

struct PollRun {
  double lag_p99 = 0, achieved = 0;
  int ok = 0, busy = 0, dropped = 0, other = 0;
};

PollRun run_polled_check(std::uint16_t api, std::uint16_t sim, double rate, double seconds, int pollers) {
  const std::string id = start_check(api, sim, rate, seconds, pollers ? "polled" : "quiet");
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, busy{0}, dropped{0}, other{0};
  std::vector<std::thread> threads;
  for (int p = 0; p < pollers; ++p) {
    threads.emplace_back([&, p] {
      std::mt19937 rng(static_cast<unsigned>(p));
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 300));  // a dashboard's phase
      KeepAlive conn(api);
      while (!stop) {
        int retry_after = -1;
        switch (conn.get("/v1/sweeps/" + id, retry_after)) {
          case KeepAlive::Answer::ok:
            ++ok;
            std::this_thread::sleep_for(300ms);
            break;
          case KeepAlive::Answer::busy:
            ++busy;
            std::this_thread::sleep_for(std::chrono::seconds(std::max(retry_after, 1)));
            break;
          case KeepAlive::Answer::dropped:
            ++dropped;
            std::this_thread::sleep_for(300ms);
            break;
          case KeepAlive::Answer::other:
            ++other;
            std::this_thread::sleep_for(300ms);
            break;
        }
      }
    });
  }
  // The pollers poll for the check's length (its warm-up included) and a little more, then stop:
  // the bench's own requests share their address and their cap.
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<long>((seconds + 3) * 1000)));
  stop = true;
  for (auto& t : threads) t.join();
  const json done = wait_done(api, id, std::chrono::seconds(static_cast<long>(seconds) + 120));
  PollRun out;
  const json steps = get_json(api, "/v1/sweeps/" + id + "/steps")["steps"];
  if (steps.is_array() && !steps.empty()) {
    out.lag_p99 = steps[0]["summary"].value("p99_schedule_lag_ms", 0.0);
    out.achieved = steps[0]["summary"].value("achieved_rate_rps", 0.0);
  }
  out.ok = ok;
  out.busy = busy;
  out.dropped = dropped;
  out.other = other;
  if (done["status"] != "succeeded") fmt::print("    (job ended {})\n", done.value("status", "?"));
  return out;
}

void part_e(const fs::path& dir, double rate, double seconds, int pollers) {
  fmt::print(
      "(e) {} keep-alive pollers from one address every 0.3 s during a {:.0f} req/s check of {:.0f} s "
      "(per-client cap 128)\n",
      pollers, rate, seconds);
  const std::uint16_t sp = free_port(), ap = free_port();
  Child sim({CAPSWEEP_LLMSIM_PATH, "--listen", fmt::format("127.0.0.1:{}", sp)}, dir / "sim-e.log", sp, "/health");
  Child d({CAPSWEEPD_PATH, "--listen", fmt::format("127.0.0.1:{}", ap), "--db", (dir / "e.db").string()}, dir / "e.log",
          ap, "/healthz");
  fmt::print("    {:<8} {:>11} {:>10} {:>8} {:>12} {:>9} {:>8} {:>10}\n", "run", "lag p99 ms", "achieved", "200",
             "503+Retry", "dropped", "other", "answered");
  for (int n : {0, pollers}) {
    const PollRun r = run_polled_check(ap, sp, rate, seconds, n);
    const int all = r.ok + r.busy + r.dropped + r.other;
    fmt::print("    {:<8} {:>11.3f} {:>10.2f} {:>8} {:>12} {:>9} {:>8} {:>9.2f}%\n", n ? "polled" : "quiet", r.lag_p99,
               r.achieved, r.ok, r.busy, r.dropped, r.other, all ? 100.0 * (r.ok + r.busy) / all : 100.0);
  }
  fmt::print("    capsweepd alive after: {}\n",
             http_request(loopback(ap), "GET", "/healthz").status == 200 ? "yes" : "NO");
}

// Identical fixed-rate steps back to back (checks at one rate) for `minutes`: any growth of
// resident memory from the first step on is what the service keeps, not a larger step.
void part_b(const fs::path& dir, double minutes, double rate) {
  fmt::print("(b) capsweepd resident memory over {:.1f} minutes of identical {:.0f} req/s steps\n", minutes, rate);
  const std::uint16_t sp = free_port(), ap = free_port();
  Child sim({CAPSWEEP_LLMSIM_PATH, "--listen", fmt::format("127.0.0.1:{}", sp)}, dir / "sim-b.log", sp, "/health");
  Child d({CAPSWEEPD_PATH, "--listen", fmt::format("127.0.0.1:{}", ap), "--db", (dir / "b.db").string()}, dir / "b.log",
          ap, "/healthz");
  const double step_s = std::clamp(minutes * 60 / 20, 3.0, 120.0);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(minutes * 60);
  std::size_t first = 0, last = 0, peak = 0, steps = 0, requests = 0;
  while (std::chrono::steady_clock::now() < end) {
    json spec = job(sp, "repeat");
    spec["kind"] = "check";
    spec["check"] = {{"rate_rps", rate}, {"duration_s", step_s}, {"warmup_s", 1}};
    const std::string id = submit(ap, spec);
    const json done = wait_done(ap, id, std::chrono::seconds(static_cast<long>(step_s) + 120));
    if (done.is_object() && done.contains("result") && done["result"].is_object()) {
      requests += done["result"]["observations"].value("measured", std::size_t{0});
    }
    ++steps;
    last = rss_kib(d.pid());
    peak = std::max(peak, last);
    if (steps == 1) first = last;
    fmt::print("    after step {:>3}: RSS {:>7} KiB\n", steps, last);
    std::fflush(stdout);
  }
  if (first > 0) {
    fmt::print(
        "    {} steps, {} measured requests: RSS after the first step {} KiB, after the last {} KiB (peak {} KiB): "
        "growth {:+.1f}%\n",
        steps, requests, first, last, peak,
        100.0 * (static_cast<double>(last) - static_cast<double>(first)) / static_cast<double>(first));
  }
}

// Resident memory of a daemon with nothing running: sampled after its jobs ended (each step's
// memory is handed back when it is stored), once it has held still for a moment.
std::size_t quiet_rss_kib(pid_t pid) {
  std::this_thread::sleep_for(2s);
  return rss_kib(pid);
}

// One sweep whose steps are long enough that it lasts about `minutes`. The reference is the
// daemon after one step of its own (a short check, so the database, the pools and the first
// step's allocations exist); the figure is the daemon after the sweep ended, both at rest.
// Samples taken while the sweep runs are printed too: each includes the step then running.
void part_c(const fs::path& dir, double minutes, double first_step_s) {
  fmt::print("(c) capsweepd resident memory over one sweep of about {:.1f} minutes\n", minutes);
  const std::uint16_t sp = free_port(), ap = free_port();
  Child sim({CAPSWEEP_LLMSIM_PATH, "--listen", fmt::format("127.0.0.1:{}", sp)}, dir / "sim-c.log", sp, "/health");
  Child d({CAPSWEEPD_PATH, "--listen", fmt::format("127.0.0.1:{}", ap), "--db", (dir / "c.db").string()}, dir / "c.log",
          ap, "/healthz");
  json first_job = job(sp, "first-step");
  first_job["kind"] = "check";
  first_job["check"] = {{"rate_rps", 10}, {"duration_s", first_step_s}, {"warmup_s", 1}};
  wait_done(ap, submit(ap, first_job), std::chrono::seconds(200));
  const std::size_t first = quiet_rss_kib(d.pid());
  const std::size_t first_anon = status_kib(d.pid(), "RssAnon"), first_file = status_kib(d.pid(), "RssFile");
  fmt::print(
      "    after one {:.0f} s step, at rest: RSS {:>7} KiB (heap and stacks {} KiB, program and library pages {} "
      "KiB)\n",
      first_step_s, first, first_anon, first_file);
  // About ten ladder steps and a few refinement steps share the time.
  const double step_s = std::clamp(minutes * 60 / 12, 2.0, 3600.0);
  json spec = job(sp, "long-sweep");
  spec["sweep"] = {{"steps", 10},
                   {"step_duration_s", step_s},
                   {"warmup_s", std::min(10.0, step_s / 4)},
                   {"max_step_duration_s", step_s + 10}};
  if (minutes < 1) {
    // A smoke run: steps this short cannot decide a p95, so the sweep is held to a few
    // fixed-rate steps instead of halving its way down.
    spec["sweep"]["steps"] = 2;
    spec["sweep"]["max_steps"] = 3;
  }
  const std::string id = submit(ap, spec);
  const auto started = std::chrono::steady_clock::now();
  const auto limit = started + std::chrono::duration<double>(minutes * 60 * 3 + 300);
  std::size_t seen = 0, peak = 0;
  json state;
  while (std::chrono::steady_clock::now() < limit) {
    state = get_json(ap, "/v1/sweeps/" + id);
    const std::size_t now_rss = rss_kib(d.pid());
    peak = std::max(peak, now_rss);
    const json steps = get_json(ap, "/v1/sweeps/" + id + "/steps")["steps"];
    if (steps.is_array() && steps.size() > seen) {
      seen = steps.size();
      const json& s = steps.back()["summary"];
      fmt::print("    step {:>3} stored ({:>6.2f} req/s, {:>6} requests): RSS {:>7} KiB with the next step starting\n",
                 seen, s.value("achieved_rate_rps", 0.0), s.value("measured", std::size_t{0}), now_rss);
      std::fflush(stdout);
    }
    if (state.is_object() && state["status"] != "queued" && state["status"] != "running") break;
    std::this_thread::sleep_for(250ms);
  }
  const double ran_min = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() / 60;
  const std::size_t last = quiet_rss_kib(d.pid());
  const std::size_t last_anon = status_kib(d.pid(), "RssAnon"), last_file = status_kib(d.pid(), "RssFile");
  fmt::print("    sweep ended {} after {} steps and {:.1f} minutes\n",
             state.is_object() ? state.value("status", "?") : "?", seen, ran_min);
  fmt::print(
      "    RSS at rest after one step {} KiB, at rest after the sweep {} KiB (highest while it ran {} KiB): growth "
      "{:+.1f}%\n",
      first, last, peak,
      100.0 * (static_cast<double>(last) - static_cast<double>(first)) /
          static_cast<double>(std::max<std::size_t>(first, 1)));
  fmt::print("    of which heap and stacks {} -> {} KiB, program and library pages {} -> {} KiB\n", first_anon,
             last_anon, first_file, last_file);
}

void part_d(const fs::path& dir, double minutes, double rate) {
  fmt::print("(d) capsweepd resident memory over one scenario of {:.1f} minutes at {:g} req/s\n", minutes, rate);
  const std::uint16_t sp = free_port(), ap = free_port();
  // A simulator sized to take the rate (about 100 req/s for 200 + 64 tokens), so that what is
  // measured is the scenario's own memory, not a backlog growing without bound.
  Child sim({CAPSWEEP_LLMSIM_PATH, "--listen", fmt::format("127.0.0.1:{}", sp), "--max-num-seqs", "128",
             "--decode-per-seq-ms", "0.05"},
            dir / "sim-d.log", sp, "/health");
  Child d({CAPSWEEPD_PATH, "--listen", fmt::format("127.0.0.1:{}", ap), "--db", (dir / "d.db").string()}, dir / "d.log",
          ap, "/healthz");
  const std::size_t before = quiet_rss_kib(d.pid());
  json spec = job(sp, "long-scenario");
  spec["kind"] = "scenario";
  spec["arrival"] = {{"process", "poisson"}};
  spec["scenario"] = {{"capacity_rps", rate},
                      {"window_s", 5},
                      {"profile", {{{"duration_s", minutes * 60}, {"rate_rps", rate}}}},
                      {"checks", {{"recovery_s", {{"max", 60}}}}}};
  const std::string id = submit(ap, spec);
  const auto started = std::chrono::steady_clock::now();
  const auto limit = started + std::chrono::duration<double>(minutes * 60 * 2 + 300);
  const double every_s = std::max(minutes * 60 / 12, 1.0);
  double next_print = every_s;
  std::size_t early = 0, late = 0, peak = 0;
  json state;
  while (std::chrono::steady_clock::now() < limit) {
    state = get_json(ap, "/v1/sweeps/" + id);
    if (state.is_object() && state["status"] != "queued" && state["status"] != "running") break;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const std::size_t now_rss = rss_kib(d.pid());
    peak = std::max(peak, now_rss);
    if (t >= next_print) {
      const json& w = state["progress"]["window"];
      auto figure = [&](const char* key) {
        return w.is_object() && w.contains(key) && w[key].is_number() ? fmt::format("{:.0f}", w[key].get<double>())
                                                                      : std::string("-");
      };
      fmt::print("    {:>6.1f} min: RSS {:>7} KiB, window {} ({} completed, TTFT p95 {} ms)\n", t / 60, now_rss,
                 figure("index"), figure("completed"), figure("p95_ttft_ms"));
      std::fflush(stdout);
      if (early == 0) early = now_rss;
      late = now_rss;
      next_print += every_s;
    }
    std::this_thread::sleep_for(250ms);
  }
  const double ran_min = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() / 60;
  const json windows = get_json(ap, "/v1/sweeps/" + id + "/windows")["windows"];
  const std::size_t after = quiet_rss_kib(d.pid());
  fmt::print("    scenario ended {} after {:.1f} minutes with {} windows stored\n",
             state.is_object() ? state.value("status", "?") : "?", ran_min, windows.is_array() ? windows.size() : 0);
  fmt::print(
      "    RSS while running: {} KiB at the first sample, {} KiB at the last (highest {} KiB): growth {:+.1f}%; at "
      "rest {} KiB before, {} KiB after\n",
      early, late, peak,
      100.0 * (static_cast<double>(late) - static_cast<double>(early)) /
          static_cast<double>(std::max<std::size_t>(early, 1)),
      before, after);
}

}  // namespace

struct SweepRun {
  double wall_s = 0;
  json result;
  int steps = 0, decided = 0, at_max = 0;
  std::size_t measured = 0;
  std::string trail;  // each fixed-rate step: its phase's letter, rate and verdict (+ pass, - not)
  std::vector<std::pair<double, bool>> full_trials;  // full-length fixed-rate steps: rate, passed
};

SweepRun run_sweep(std::uint16_t api, const json& spec) {
  SweepRun run;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string id = submit(api, spec);
  const json done = wait_done(api, id, std::chrono::hours(2));
  run.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (done.value("status", "") != "succeeded") throw std::runtime_error("the sweep did not succeed: " + done.dump());
  run.result = done["result"];
  const json steps = get_json(api, "/v1/sweeps/" + id + "/steps");
  for (const auto& st : steps.value("steps", json::array())) {
    ++run.steps;
    run.measured += st["summary"].value("measured", std::size_t{0});
    const std::string phase = st.value("phase", "");
    if (st["offered_rate_rps"].is_number() && !phase.empty()) {
      const char letter = phase == "rerun" ? 'X' : static_cast<char>(std::toupper(phase[0]));
      run.trail += fmt::format("{}{}{:.3g}{}", run.trail.empty() ? "" : " ", letter,
                               st["offered_rate_rps"].get<double>(), st.value("verdict", "") == "pass" ? '+' : '-');
      if (phase != "scout")
        run.full_trials.emplace_back(st["offered_rate_rps"].get<double>(), st.value("verdict", "") == "pass");
    }
    if (st["summary"].contains("stop")) {
      const std::string by = st["summary"]["stop"].value("by", "");
      run.decided += by == "decided";
      run.at_max += by == "max_length";
    }
  }
  return run;
}

void print_sweep(const char* mode, const SweepRun& r) {
  const json& bracket = r.result["slo_bracket_rps"];
  fmt::print(
      "    {:<8} {:>7.0f} s  {:>3} steps ({:>2} decided, {:>2} at max)  {:>7} measured requests  max SLO rate {} "
      "req/s  bracket {}\n",
      mode, r.wall_s, r.steps, r.decided, r.at_max, r.measured,
      r.result["max_slo_rate_rps"].is_number() ? fmt::format("{:.3g}", r.result["max_slo_rate_rps"].get<double>())
                                               : std::string("none"),
      bracket.dump());
  std::fflush(stdout);
}

void part_f(const fs::path& dir, double step_s, bool quick) {
  fmt::print(
      "(f) one sweep, fixed-length steps vs steps stopped when decided (step.stop \"decided\"), {:.0f}-s steps\n",
      step_s);
  struct Model {
    const char* name;
    std::vector<std::string> sim_args;
    json slo;
    json sweep;
  };
  const std::vector<Model> models{
      {"llmsim default model (64 sequences, ~36 req/s)",
       {},
       {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}},
       {{"steps", quick ? 3 : 6}, {"step_duration_s", step_s}, {"warmup_s", quick ? 1 : 5}}},
      {"slow model (2 sequences, 100 ms a token, 30 tokens: ~0.64 req/s)",
       {"--max-num-seqs", "2", "--decode-base-ms", "100", "--decode-per-seq-ms", "0"},
       {{"ttft_ms", {{"p50", 2500}}}, {"itl_ms", {{"p50", 400}}}},
       {{"steps", quick ? 2 : 4},
        {"step_duration_s", step_s},
        {"warmup_s", quick ? 1 : 5},
        {"baseline_requests", 3},
        {"probe_requests", 8},
        {"probe_concurrency", 8}}},
  };
  for (const Model& m : models) {
    fmt::print("  {}\n", m.name);
    const std::uint16_t sp = free_port(), ap = free_port();
    std::vector<std::string> args{CAPSWEEP_LLMSIM_PATH, "--listen", fmt::format("127.0.0.1:{}", sp)};
    args.insert(args.end(), m.sim_args.begin(), m.sim_args.end());
    Child sim(args, dir / "sim-f.log", sp, "/health");
    Child d({CAPSWEEPD_PATH, "--listen", fmt::format("127.0.0.1:{}", ap), "--db", (dir / "f.db").string()},
            dir / "f.log", ap, "/healthz");
    json spec = job(sp, "fixed or decided");
    if (!m.sim_args.empty()) spec["workload"]["output_tokens"]["value"] = 30;
    spec["slo"] = m.slo;
    spec["sweep"] = m.sweep;
    print_sweep("fixed", run_sweep(ap, spec));
    spec["step"] = {{"stop", "decided"}};
    print_sweep("decided", run_sweep(ap, spec));
    fs::remove(dir / "f.db");
  }
}

// The machine's busy share of its CPU time since the last call (/proc/stat).
struct MachineCpu {
  double busy = 0, total = 0;
  double share() {
    std::ifstream in("/proc/stat");
    std::string cpu;
    double v[10] = {};
    in >> cpu;
    for (double& x : v) in >> x;
    double all = 0;
    for (double x : v) all += x;
    const double idle = v[3] + v[4];
    const double d_busy = (all - idle) - busy, d_total = all - total;
    busy = all - idle;
    total = all;
    return d_total > 0 ? d_busy / d_total : 0;
  }
};

struct SearchRun {
  std::string target, mode;
  int run = 0;
  SweepRun sweep;
  std::string error;
};

// One sweep of `spec` (its search and seed set) against a simulator of its own, by a capsweepd
// of its own, so runs can go side by side without sharing a target.
void search_run(const fs::path& dir, const std::vector<std::string>& sim_args, json spec, SearchRun& out) {
  static std::mutex starting;  // one pair starts at a time: two threads never pick one free port
  try {
    const std::string tag = fmt::format("h-{}-{}-{}", out.target, out.mode, out.run);
    std::unique_lock lock(starting);
    const std::uint16_t sp = free_port();
    std::vector<std::string> args{CAPSWEEP_LLMSIM_PATH, "--listen", fmt::format("127.0.0.1:{}", sp)};
    args.insert(args.end(), sim_args.begin(), sim_args.end());
    Child sim(args, dir / (tag + "-sim.log"), sp, "/health");
    const std::uint16_t ap = free_port();
    Child d({CAPSWEEPD_PATH, "--listen", fmt::format("127.0.0.1:{}", ap), "--db", (dir / (tag + ".db")).string()},
            dir / (tag + ".log"), ap, "/healthz");
    lock.unlock();
    const std::string base = fmt::format("http://127.0.0.1:{}", sp);
    spec["target"]["base_url"] = base;
    spec["target"]["metrics_url"] = base + "/metrics";
    out.sweep = run_sweep(ap, spec);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double number_in(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

// The band of answers a bisection of full-length trials to the tolerance can give, from the
// trials seen: [lowest failing rate / (1 + tolerance), highest passing rate]. A sweep's answer
// is a passing trial whose failing neighbour lies within the tolerance above it, so it can be
// no lower than the first and no higher than the second.
struct Band {
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  void add(const SweepRun& r, double tolerance) {
    for (const auto& [rate, passed] : r.full_trials) {
      if (passed)
        hi = std::max(hi, rate);
      else
        lo = std::min(lo, rate / (1 + tolerance));
    }
  }
  bool holds(double a) const { return a >= lo * (1 - 1e-9) && a <= hi * (1 + 1e-9); }
};

void print_search_runs(const std::vector<SearchRun>& runs, const std::string& target, double saturation) {
  std::vector<double> wall[2];
  Band all, ladder;
  for (const auto& r : runs) {
    if (r.target != target) continue;
    if (!r.error.empty()) {
      fmt::print("    run {} {:<6} failed: {}\n", r.run, r.mode, r.error);
      continue;
    }
    const json& res = r.sweep.result;
    const json& search = res["search"];
    fmt::print(
        "    run {} {:<6} {:>6.0f} s  {:>2} steps ({:>2} short)  {:>6} measured requests  max SLO rate {:.4g}  "
        "bracket {}\n",
        r.run, r.mode, r.sweep.wall_s, r.sweep.steps, search.value("scout_steps", 0), r.sweep.measured,
        number_in(res, "max_slo_rate_rps"), res["slo_bracket_rps"].dump());
    fmt::print("      {}\n", r.sweep.trail);
    wall[r.mode == "scout"].push_back(r.sweep.wall_s);
    all.add(r.sweep, 0.05);
    if (r.mode == "ladder") ladder.add(r.sweep, 0.05);
  }
  const double ml = median_of(wall[0]), ms = median_of(wall[1]);
  fmt::print("    median wall time: ladder {:.0f} s, scout {:.0f} s: {:.2f} of the ladder's\n", ml, ms,
             ml > 0 ? ms / ml : 0);
  int in_all = 0, in_ladder = 0, above = 0, n = 0;
  for (const auto& r : runs) {
    if (r.target != target || r.mode != "scout" || !r.error.empty()) continue;
    ++n;
    const double a = number_in(r.sweep.result, "max_slo_rate_rps");
    in_all += all.holds(a);
    in_ladder += ladder.holds(a);
    above += a > saturation;
  }
  fmt::print(
      "    trial band of 60-s trials (lowest failing rate / 1.05 to highest passing rate), from every run's full "
      "steps: "
      "[{:.4g}, {:.4g}], scout answers in it: {} of {}; from the ladder runs' alone: [{:.4g}, {:.4g}], {} of {}; "
      "above the model's saturation ({:.4g} req/s): {}\n",
      all.lo, all.hi, in_all, n, ladder.lo, ladder.hi, in_ladder, n, saturation, above);
  std::fflush(stdout);
}

// (h) the ladder (today's default search) against the scouting search, both on the same spec
// and seed, three runs each, all side by side: every sweep has its own simulator and capsweepd.
void part_h(const fs::path& dir, bool quick, int runs) {
  struct Target {
    std::string name, about;
    json slo;
  };
  const std::vector<Target> targets{
      {"ttft",
       "llmsim's default model, TTFT p95 <= 800 ms and ITL p95 <= 50 ms (its saturation limits)",
       {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}},
      {"itl",
       "llmsim's default model, TTFT p95 <= 800 ms and ITL p95 <= 20 ms (the ITL bound limits, below saturation)",
       {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 20}}}}},
  };
  const json sweep = quick ? json{{"steps", 3}, {"step_duration_s", 6}, {"warmup_s", 2}} : json::object();
  // llmsim's default model for this workload (P = 200, O = 64): an iteration of a full batch of
  // N = 64 lasts 8 + 0.25 N + 0.02 P N / O ms, and N / (O T) requests end per second.
  const double t_ms = 8 + 0.25 * 64 + 0.02 * 200 * 64 / 64.0;
  const double saturation = 64 / (64 * t_ms / 1000);
  fmt::print(
      "(h) the ladder against the scouting search (sweep.search \"scout\"), {} run(s) each, {} sweeps side by "
      "side, {}\n",
      runs, targets.size() * 2 * static_cast<std::size_t>(runs),
      quick ? "6-s steps" : "the default 60-s steps after 10-s warm-ups");
  std::vector<SearchRun> results;
  for (const auto& t : targets) {
    for (int i = 1; i <= runs; ++i) {
      for (const char* mode : {"ladder", "scout"}) results.push_back({t.name, mode, i, {}, {}});
    }
  }
  MachineCpu cpu;
  cpu.share();
  std::vector<std::thread> threads;
  for (auto& r : results) {
    const auto& t = *std::find_if(targets.begin(), targets.end(), [&](const Target& x) { return x.name == r.target; });
    json spec = job(0, "search " + r.mode);
    spec["slo"] = t.slo;
    spec["sweep"] = sweep;
    spec["sweep"]["search"] = r.mode;
    spec["workload"]["seed"] = 100 + r.run;
    threads.emplace_back([&dir, spec, &r] { search_run(dir, {}, spec, r); });
  }
  for (auto& th : threads) th.join();
  const double busy = cpu.share();
  for (const auto& t : targets) {
    fmt::print("  {}\n", t.about);
    print_search_runs(results, t.name, saturation);
  }
  fmt::print("  the machine's CPU was {:.0f}% busy over the runs\n", 100 * busy);
}

// CPU seconds a process has used (utime + stime of /proc/PID/stat).
double process_cpu_s(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));  // after "pid (comm) "
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(f);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// (g): capsweepd's engine at a high rate, measured from outside: Poisson checks of 16-token
// prompts and answers against the fast SSE server (a process of its own, one write per
// answer), each check's schedule lag from its stored step and capsweepd's CPU per token.
void part_g(const fs::path& dir, double rate, double seconds, int runs) {
  fmt::print(
      "(g) capsweepd: Poisson checks at {:.0f} req/s for {:.0f} s (1 s warm-up), 16-token answers, against a "
      "fast SSE server; nothing pinned\n",
      rate, seconds);
  capsweep::bench::FastSseServer sim({16, std::chrono::microseconds(0), false});
  const std::uint16_t ap = free_port();
  Child d({CAPSWEEPD_PATH, "--listen", fmt::format("127.0.0.1:{}", ap), "--db", (dir / "g.db").string()}, dir / "g.log",
          ap, "/healthz");
  fmt::print("    {:>4} {:>10} {:>12} {:>12} {:>12} {:>16} {:>18}\n", "run", "achieved", "lag p50 ms", "lag p99 ms",
             "lag max ms", "capsweepd CPU-s", "events/CPU-s");
  for (int run = 1; run <= runs; ++run) {
    const std::string base = fmt::format("http://127.0.0.1:{}", sim.port());
    json spec = {{"name", "engine"},
                 {"kind", "check"},
                 {"target", {{"base_url", base}, {"model", "sim-8b"}}},
                 {"workload",
                  {{"prompt_tokens", {{"dist", "fixed"}, {"value", 16}}},
                   {"output_tokens", {{"dist", "fixed"}, {"value", 16}}}}},
                 {"slo", {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}},
                 {"check", {{"rate_rps", rate}, {"duration_s", seconds}, {"warmup_s", 1}}}};
    const double cpu0 = process_cpu_s(d.pid());
    const std::string id = submit(ap, spec);
    const json done = wait_done(ap, id, std::chrono::seconds(static_cast<long>(seconds) + 120));
    const double cpu = process_cpu_s(d.pid()) - cpu0;
    const json steps = get_json(ap, "/v1/sweeps/" + id + "/steps")["steps"];
    if (!steps.is_array() || steps.empty()) {
      fmt::print("    {:>4} (no step: the job ended {})\n", run, done.value("status", "?"));
      continue;
    }
    const json& sm = steps[0]["summary"];
    const double tokens = sm.value("total_output_tokens", 0.0);
    fmt::print("    {:>4} {:>10.1f} {:>12.3f} {:>12.3f} {:>12.3f} {:>16.2f} {:>18.0f}\n", run,
               sm.value("achieved_rate_rps", 0.0), sm.value("p50_schedule_lag_ms", 0.0),
               sm.value("p99_schedule_lag_ms", 0.0), sm.value("max_schedule_lag_ms", 0.0), cpu,
               cpu > 0 ? tokens / cpu : 0.0);
  }
}

int main(int argc, char** argv) {
  bool quick = false;
  std::string parts = "abcd";  // e on request: 300 pollers need the machine to themselves
  double rate = 100, seconds = 20, minutes = 60, scenario_rate = 50;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--parts" && i + 1 < argc)
      parts = argv[++i];
    else if (a == "--rate" && i + 1 < argc)
      rate = std::stod(argv[++i]);
    else if (a == "--seconds" && i + 1 < argc)
      seconds = std::stod(argv[++i]);
    else if (a == "--minutes" && i + 1 < argc)
      minutes = std::stod(argv[++i]);
    else if (a == "--scenario-rate" && i + 1 < argc)
      scenario_rate = std::stod(argv[++i]);
    else {
      fmt::print(stderr,
                 "usage: capsweep-bench-service [--quick] [--parts abcdefgh] [--rate R] [--seconds S] [--minutes M] "
                 "[--scenario-rate R]\n");
      return 2;
    }
  }
  if (quick) {
    rate = 20;
    seconds = 3;
    minutes = 0.2;
    scenario_rate = 10;
  }
  const fs::path dir = fs::temp_directory_path() / fmt::format("capsweep-bench-service-{}", getpid());
  fs::create_directories(dir);
  try {
    if (parts.find('a') != std::string::npos) part_a(dir, rate, seconds);
    if (parts.find('b') != std::string::npos) part_b(dir, minutes, quick ? 10 : 20);
    if (parts.find('c') != std::string::npos) part_c(dir, minutes, quick ? 3 : 20);
    if (parts.find('d') != std::string::npos) part_d(dir, minutes, scenario_rate);
    if (parts.find('e') != std::string::npos) part_e(dir, quick ? 50 : 200, quick ? 3 : seconds, quick ? 150 : 300);
    if (parts.find('f') != std::string::npos) part_f(dir, quick ? 5 : 30, quick);
    if (parts.find('g') != std::string::npos) part_g(dir, quick ? 1000 : 10000, quick ? 2 : 5, quick ? 1 : 3);
    if (parts.find('h') != std::string::npos) part_h(dir, quick, quick ? 1 : 3);
  } catch (const std::exception& e) {
    fmt::print(stderr, "capsweep-bench-service: {}\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  return 0;
}

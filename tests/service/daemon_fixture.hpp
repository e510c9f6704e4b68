#pragma once
// Runs the real capsweepd program as a child process on 127.0.0.1 with a port it alone
// uses, a database file of the test's, and its stderr in a log file; kills it (SIGKILL) at
// the end of the test if it is still alive. Stops, kills and restarts on demand.

#include <sys/types.h>

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "support/http_client.hpp"

namespace capsweep::testing {

// A fresh directory under the temp dir for a test's database, config and logs.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  std::filesystem::path path(const std::string& name) const { return dir_ / name; }

 private:
  std::filesystem::path dir_;
};

// The whole text of a file ("" when it cannot be read).
std::string read_text(const std::filesystem::path& p);
// Runs a shell command line; its exit code, or -1 when it did not exit normally.
int shell_exit(const std::string& command);
// How many times `what` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& what);
// A job aimed at a simulator at `base_url`: the demo's target, workload (200 prompt and 64
// output tokens) and SLO (TTFT p95 800 ms, ITL p95 50 ms); add "sweep" or "check".
nlohmann::json sim_job(const std::string& base_url, const std::string& name);

// Sends `request` as it is (a request line, headers, perhaps a body) on a connection of its
// own and reads what the server answers until it closes the connection, or 10 s have passed.
std::string raw_exchange(const boost::asio::ip::tcp::endpoint& ep, const std::string& request);

// Whether a job's view says it ended: succeeded, failed or cancelled.
bool job_ended(const nlohmann::json& view);
// "http://127.0.0.1:<port>": a loopback server's base URL.
std::string loopback_url(std::uint16_t port);

// Starts `argv` (a program's path first) as a child process, its stdout and stderr appended
// to `log`, under the open-file limit `nofile` where given; its pid.
pid_t spawn_child(std::vector<std::string> argv, const std::filesystem::path& log,
                  std::optional<unsigned long> nofile = std::nullopt);
// Whether `path` at `ep` answers 200 within `wait` (bounded by time: a sanitizer build on a
// loaded machine can take seconds to come up).
bool serves(const boost::asio::ip::tcp::endpoint& ep, const std::string& path,
            std::chrono::seconds wait = std::chrono::seconds(30));
// A loopback port free when asked (bound, read and released).
std::uint16_t free_port();

// capsweep-llmsim as a process of its own (`args` after --listen), which a test can kill with
// SIGKILL as a replica dies: its connections reset, its port refusing.
class SimProcess {
 public:
  SimProcess(std::filesystem::path log, std::vector<std::string> args);
  ~SimProcess() { kill9(); }
  SimProcess(const SimProcess&) = delete;
  SimProcess& operator=(const SimProcess&) = delete;
  std::string url() const { return loopback_url(ep_.port()); }
  const boost::asio::ip::tcp::endpoint& endpoint() const { return ep_; }
  void kill9();

 private:
  boost::asio::ip::tcp::endpoint ep_;
  pid_t pid_ = -1;
};

class Daemon {
 public:
  // Starts capsweepd --listen 127.0.0.1:<free port> --db <db> plus `args`; waits for /healthz.
  // With `nofile`, under that open-file limit (soft and hard).
  Daemon(std::filesystem::path db, std::filesystem::path log, std::vector<std::string> args = {},
         std::optional<unsigned long> nofile = std::nullopt);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  const boost::asio::ip::tcp::endpoint& endpoint() const { return ep_; }
  pid_t pid() const { return pid_; }
  bool alive();
  // SIGKILL, as a crash.
  void kill9();
  // SIGTERM and wait (bounded); the exit status, or -1 when it had to be killed.
  int terminate(std::chrono::seconds wait = std::chrono::seconds(20));
  // Starts it again on the same port and database.
  void restart();

  HttpResult get(const std::string& target, const std::map<std::string, std::string>& headers = {}) const;
  HttpResult post(const std::string& target, const std::string& body,
                  const std::map<std::string, std::string>& headers = {}) const;
  HttpResult del(const std::string& target) const;
  nlohmann::json get_json(const std::string& target) const;
  // Polls GET /v1/sweeps/{id} until `done(view)` holds or the deadline passes; the last view.
  nlohmann::json wait_for(const std::string& id, const std::function<bool(const nlohmann::json&)>& done,
                          std::chrono::seconds deadline) const;
  std::string log_text() const;

 private:
  void spawn();
  std::filesystem::path db_, log_;
  std::vector<std::string> args_;
  std::optional<unsigned long> nofile_;
  boost::asio::ip::tcp::endpoint ep_;
  pid_t pid_ = -1;
};

}  // namespace capsweep::testing

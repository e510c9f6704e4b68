#include "service/daemon_fixture.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace capsweep::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::random_device rd;
  dir_ = fs::temp_directory_path() / ("capsweep-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
  fs::create_directories(dir_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int shell_exit(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

bool job_ended(const nlohmann::json& view) {
  const auto s = view.value("status", "");
  return s == "succeeded" || s == "failed" || s == "cancelled";
}

std::string loopback_url(std::uint16_t port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

nlohmann::json sim_job(const std::string& base_url, const std::string& name) {
  return {
      {"name", name},
      {"target", {{"base_url", base_url}, {"model", "sim-8b"}, {"metrics_url", base_url + "/metrics"}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 200}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 64}}}}},
      {"slo", {{"ttft_ms", {{"p95", 800}}}, {"itl_ms", {{"p95", 50}}}}}};
}

std::string raw_exchange(const boost::asio::ip::tcp::endpoint& ep, const std::string& request) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket s(io);
  s.connect(ep);
  boost::system::error_code ec;
  boost::asio::write(s, boost::asio::buffer(request), ec);  // a server that answers early may close first
  s.non_blocking(true);
  std::string answer;
  std::array<char, 4096> buf{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::size_t n = s.read_some(boost::asio::buffer(buf), ec);
    answer.append(buf.data(), n);
    if (ec == boost::asio::error::would_block) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    if (ec) break;  // closed (or reset)
  }
  return answer;
}

std::uint16_t free_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return probe.local_endpoint().port();
}

pid_t spawn_child(std::vector<std::string> argv, const fs::path& log, std::optional<unsigned long> nofile) {
  // Everything the child needs is made before fork: the test process has threads (an
  // in-process simulator), and a child that allocates before exec can hang on a lock one of
  // them held at the fork.
  std::vector<char*> raw;
  for (auto& a : argv) raw.push_back(a.data());
  raw.push_back(nullptr);
  const std::string log_path = log.string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (nofile) {
      const rlimit lim{*nofile, *nofile};
      ::setrlimit(RLIMIT_NOFILE, &lim);
    }
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 2);
      ::dup2(fd, 1);
    }
    ::execv(raw[0], raw.data());
    ::_exit(127);
  }
  return pid;
}

bool serves(const boost::asio::ip::tcp::endpoint& ep, const std::string& path, std::chrono::seconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    if (http_request(ep, "GET", path, "", std::chrono::milliseconds(200)).status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

SimProcess::SimProcess(fs::path log, std::vector<std::string> args)
    : ep_(boost::asio::ip::make_address("127.0.0.1"), free_port()) {
  std::vector<std::string> argv{CAPSWEEP_LLMSIM_PATH, "--listen", "127.0.0.1:" + std::to_string(ep_.port())};
  argv.insert(argv.end(), args.begin(), args.end());
  pid_ = spawn_child(std::move(argv), log);
  INFO(read_text(log));
  REQUIRE(serves(ep_, "/health"));
}

void SimProcess::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

Daemon::Daemon(fs::path db, fs::path log, std::vector<std::string> args, std::optional<unsigned long> nofile)
    : db_(std::move(db)), log_(std::move(log)), args_(std::move(args)), nofile_(nofile) {
  ep_ = boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), free_port());
  spawn();
}

Daemon::~Daemon() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

void Daemon::spawn() {
  std::vector<std::string> argv{CAPSWEEPD_PATH, "--listen", "127.0.0.1:" + std::to_string(ep_.port()), "--db",
                                db_.string()};
  argv.insert(argv.end(), args_.begin(), args_.end());
  pid_ = spawn_child(std::move(argv), log_, nofile_);
  const bool up = serves(ep_, "/healthz");
  INFO(read_text(log_));
  REQUIRE(up);
}

bool Daemon::alive() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void Daemon::kill9() {
  REQUIRE(pid_ > 0);
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
}

int Daemon::terminate(std::chrono::seconds wait) {
  REQUIRE(pid_ > 0);
  ::kill(pid_, SIGTERM);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill9();
  return -1;
}

void Daemon::restart() {
  REQUIRE(pid_ <= 0);
  spawn();
}

HttpResult Daemon::get(const std::string& target, const std::map<std::string, std::string>& headers) const {
  return http_request(ep_, "GET", target, "", headers);
}

HttpResult Daemon::post(const std::string& target, const std::string& body,
                        const std::map<std::string, std::string>& headers) const {
  return http_request(ep_, "POST", target, body, headers);
}

HttpResult Daemon::del(const std::string& target) const {
  return http_request(ep_, "DELETE", target, "");
}

nlohmann::json Daemon::get_json(const std::string& target) const {
  auto r = get(target);
  REQUIRE(r.status == 200);
  return nlohmann::json::parse(r.body);
}

nlohmann::json Daemon::wait_for(const std::string& id, const std::function<bool(const nlohmann::json&)>& done,
                                std::chrono::seconds deadline) const {
  const auto end = std::chrono::steady_clock::now() + deadline;
  nlohmann::json view;
  while (std::chrono::steady_clock::now() < end) {
    auto r = get("/v1/sweeps/" + id);
    if (r.status == 200) {
      view = nlohmann::json::parse(r.body);
      if (done(view)) return view;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return view;
}

std::string Daemon::log_text() const {
  return read_text(log_);
}

}  // namespace capsweep::testing

#pragma once
// Runs Debian's Prometheus server as a child process on loopback for the length of a test,
// with a temporary config (scraping one target every second) and temporary storage.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "service/daemon_fixture.hpp"
#include "support/http_client.hpp"

namespace capsweep::testing {

// A Prometheus server of the test's own: scrapes `target_port` every second; killed at the end.
class PrometheusServer {
 public:
  PrometheusServer(const TempDir& dir, std::uint16_t target_port) : port_(free_loopback_port()) {
    const std::filesystem::path config = dir.path("prometheus.yml");
    std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                          << "scrape_configs:\n  - job_name: target\n    static_configs:\n"
                          << "      - targets: ['127.0.0.1:" << target_port << "']\n";
    const std::string listen = "127.0.0.1:" + std::to_string(port_);
    const std::string storage = dir.path("prom-data").string();
    const std::string log = dir.path("prometheus.log").string();
    // The arguments are made before fork: a child of a threaded process must not allocate.
    std::vector<std::string> args{"prometheus", "--config.file=" + config.string(), "--storage.tsdb.path=" + storage,
                                  "--web.listen-address=" + listen, "--log.level=warn"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execvp("prometheus", argv.data());
      ::_exit(127);
    }
  }
  ~PrometheusServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  std::uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  boost::asio::ip::tcp::endpoint endpoint() const { return {boost::asio::ip::make_address("127.0.0.1"), port_}; }
  // Waits (bounded) until the server answers `promql` with at least one sample.
  bool wait_for_series(const std::string& promql, std::chrono::seconds limit) const {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      auto r = http_request(endpoint(), "GET", "/api/v1/query?query=" + promql, "", std::chrono::milliseconds(2000));
      if (r.status == 200) {
        const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
        if (j.is_object() && !j["data"]["result"].empty()) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return false;
  }

 private:
  std::uint16_t port_;
  pid_t pid_ = -1;
};

}  // namespace capsweep::testing

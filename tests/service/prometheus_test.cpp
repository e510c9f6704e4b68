// The target's gauges read through a real Prometheus server (Debian's prometheus, started here
// on loopback with a temporary config and storage, scraping the simulator every second)
// against the same gauges scraped from the simulator directly.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"
#include "service/prometheus_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

json closed_loop_check(const std::string& base, int users) {
  return {{"kind", "check"},
          {"target", {{"base_url", base}, {"model", "sim-8b"}}},
          {"workload",
           {{"prompt_tokens", {{"dist", "fixed"}, {"value", 100}}},
            {"output_tokens", {{"dist", "fixed"}, {"value", 200}}}}},
          {"check", {{"concurrency", users}, {"duration_s", 8}, {"warmup_s", 1}}},
          {"slo", {{"ttft_ms", {{"p95", 2000}}}}}};
}

json run_job(const Daemon& d, const json& spec) {
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body)["id"];
  const json v = d.wait_for(
      id, [](const json& x) { return x["status"] != "queued" && x["status"] != "running"; }, 90s);
  INFO(v.dump(1));
  REQUIRE(v["status"] == "succeeded");
  const json steps = d.get_json("/v1/sweeps/" + id + "/steps")["steps"];
  REQUIRE(steps.size() == 1);
  return steps[0]["server"];
}

}  // namespace

TEST_CASE("prometheus: gauges read through a real Prometheus server match those scraped directly") {
  REQUIRE(shell_exit("command -v prometheus >/dev/null") == 0);
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  PrometheusServer prom(dir, sim.endpoint().port());
  REQUIRE(prom.wait_for_series("vllm:num_requests_running", 60s));
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string base = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  const int users = 8;

  json direct_spec = closed_loop_check(base, users);
  direct_spec["target"]["metrics_url"] = base + "/metrics";
  const json direct = run_job(d, direct_spec);

  json via_spec = closed_loop_check(base, users);
  via_spec["target"]["prometheus"] = {{"url", "http://127.0.0.1:" + std::to_string(prom.port())},
                                      {"queries",
                                       {{"running", "sum(vllm:num_requests_running)"},
                                        {"waiting", "sum(vllm:num_requests_waiting)"},
                                        {"kv_cache", "avg(vllm:kv_cache_usage_perc)"},
                                        {"generation_tokens", "sum(vllm:generation_tokens_total)"}}}};
  const json via = run_job(d, via_spec);
  INFO("direct: " << direct.dump() << "\nvia Prometheus: " << via.dump());
  REQUIRE(via["scrapes"].get<int>() >= 5);
  CHECK(via["scrape_failures"] == 0);
  // N users keep N requests running: both sources see it; Prometheus' samples are up to one
  // scrape interval old, so the means may differ by the readings at the step's edges.
  CHECK(direct["max_running"] == users);
  CHECK(via["max_running"] == users);
  CHECK(std::abs(via["mean_running"].get<double>() - direct["mean_running"].get<double>()) <= 2.0);
  // Waiting is a transient gauge (a request between its arrival and the next batch): sampled
  // at other instants, the sources see a few such requests or none (a slow client, as under a
  // sanitizer, sends more of them at once), never more than the users, and rarely.
  CHECK(via["max_waiting"].get<double>() <= users);
  CHECK(direct["max_waiting"].get<double>() <= users);
  CHECK(std::abs(via["mean_waiting"].get<double>() - direct["mean_waiting"].get<double>()) <= 1.0);
  CHECK(via["max_kv_cache_usage"].get<double>() == Approx(direct["max_kv_cache_usage"].get<double>()).epsilon(0.25));
  CHECK(via["generation_tokens_delta"].get<double>() > 0);

  // A query the server rejects: the step still succeeds, its failures carry Prometheus' words.
  json bad = closed_loop_check(base, 2);
  bad["check"]["duration_s"] = 3;
  bad["target"]["prometheus"] = {{"url", "http://127.0.0.1:" + std::to_string(prom.port())},
                                 {"queries", {{"running", "sum(vllm:num_requests_running"}}}};
  const json rejected = run_job(d, bad);
  CHECK(rejected["scrapes"] == 0);
  CHECK(rejected["scrape_failures"].get<int>() >= 2);
  CHECK(rejected["last_scrape_error"].get<std::string>().find("bad_data") != std::string::npos);

  // Outside the allow-list (default: loopback only): refused at submit, naming the field.
  json far = closed_loop_check(base, 2);
  far["target"]["prometheus"] = {{"url", "http://192.0.2.10:9090"}, {"queries", {{"running", "up"}}}};
  auto r = d.post("/v1/sweeps", far.dump());
  CHECK(r.status == 403);
  CHECK(json::parse(r.body)["error"]["field"] == "/target/prometheus/url");
  // With metrics_url as well: one source only.
  far["target"]["prometheus"]["url"] = "http://127.0.0.1:9";
  far["target"]["metrics_url"] = base + "/metrics";
  r = d.post("/v1/sweeps", far.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"]["field"] == "/target/prometheus");
  CHECK(d.alive());
}

// Replicas (target.base_urls with balance) through capsweepd against three capsweep-llmsim
// instances: how the requests split, as each server counts them too, each replica's figures
// beside the total, and a replica killed mid-step named in the step's outage.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

// A simulated replica decoding a token every `decode_ms` (little else).
llmsim::SimConfig replica_sim(double decode_ms) {
  llmsim::SimConfig cfg = fast_sim();
  cfg.engine.decode_base_ms = decode_ms;
  return cfg;
}

std::string url_of(const SimFixture& sim) {
  return loopback_url(sim.endpoint().port());
}

// The requests a server answered in full, by its own /metrics.
double served(const SimFixture& sim) {
  const std::string answer =
      raw_exchange(sim.endpoint(), "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  const std::string name = "vllm:request_success_total{";
  const auto at = answer.find("\n" + name);
  REQUIRE(at != std::string::npos);
  const auto value = answer.find("} ", at);
  REQUIRE(value != std::string::npos);
  return std::stod(answer.substr(value + 2, answer.find('\n', value) - value - 2));
}

// A check at a constant `rate` for `seconds` (1 s warm-up) over `urls`, spread by `balance`;
// answers of `output` tokens.
json replicas_check(const std::vector<std::string>& urls, const std::string& balance, double rate, int seconds,
                    int output) {
  json spec = sim_job(urls.front(), "replicas " + balance);
  spec["kind"] = "check";
  spec["target"].erase("base_url");
  spec["target"].erase("metrics_url");
  spec["target"]["base_urls"] = urls;
  spec["target"]["balance"] = balance;
  spec["workload"] = {{"prompt_tokens", {{"dist", "fixed"}, {"value", 50}}},
                      {"output_tokens", {{"dist", "fixed"}, {"value", output}}},
                      {"seed", 11}};
  spec["arrival"] = {{"process", "constant"}};
  spec["check"] = {{"rate_rps", rate}, {"duration_s", seconds}, {"warmup_s", 1}};
  // p50: judged with confidence on each replica's third of the requests too.
  spec["slo"] = {{"e2el_ms", {{"p50", 5000}}}};
  return spec;
}

std::string submit(const Daemon& d, const json& spec) {
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  return json::parse(r.body)["id"].get<std::string>();
}

// The job's one step, once it ended.
json only_step(const Daemon& d, const std::string& id) {
  const json view = d.wait_for(id, job_ended, 120s);
  INFO(view.dump(1));
  REQUIRE(view["status"] == "succeeded");
  const json steps = d.get_json("/v1/sweeps/" + id + "/steps")["steps"];
  REQUIRE(steps.size() == 1);
  return steps[0];
}

}  // namespace

TEST_CASE("replicas: round robin splits a check's requests within 1 per replica, as each server counts them") {
  std::vector<std::unique_ptr<SimFixture>> sims;
  std::vector<std::string> urls;
  for (int k = 0; k < 3; ++k) {
    sims.push_back(std::make_unique<SimFixture>(fast_sim()));
    urls.push_back(url_of(*sims.back()));
  }
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string id = submit(d, replicas_check(urls, "round_robin", 20, 5, 16));
  const json step = only_step(d, id);
  const json& m = step["summary"];
  INFO(m.dump());
  REQUIRE(m["replicas"].size() == 3);
  CHECK(m["failed"] == 0);
  std::uint64_t least = UINT64_MAX, most = 0, sum = 0;
  double served_least = 1e18, served_most = 0;
  for (std::size_t k = 0; k < 3; ++k) {
    const json& r = m["replicas"][k];
    CHECK(r["replica"] == urls[k]);
    CHECK(r["slo_verdict"] == "pass");
    CHECK(r["mean_e2el_ms"].is_number());
    const auto n = r["measured"].get<std::uint64_t>();
    least = std::min(least, n);
    most = std::max(most, n);
    sum += n;
    served_least = std::min(served_least, served(*sims[k]));
    served_most = std::max(served_most, served(*sims[k]));
  }
  CHECK(sum == m["measured"].get<std::uint64_t>());
  CHECK(least >= 25);
  CHECK(most - least <= 1);
  // The servers' own counts (warm-up requests too): every request, split alike.
  CHECK(served_least >= 30);
  CHECK(served_most - served_least <= 1);
  // steps.csv and the report give each replica's figures.
  const auto csv = d.get("/v1/sweeps/" + id + "/steps.csv");
  CHECK(csv.body.find("replica3_name,replica3_slo_verdict") != std::string::npos);
  CHECK(csv.body.find(urls[2]) != std::string::npos);
  const auto report = d.get("/v1/sweeps/" + id + "/report");
  CHECK(report.body.find("Replicas, one by one") != std::string::npos);
}

TEST_CASE("replicas: least in flight sends more to the faster replica, as its server counts them") {
  // Replica 0 decodes a token every 4 ms, replicas 1 and 2 every 16: at 30 requests/s of 48
  // tokens, an answer takes ~0.2 s on the fast one and ~0.8 s on a slow one. Balanced by
  // requests in flight, each replica carries about as many at once: the fast one, finishing
  // them 4 times sooner, takes more; round robin would give each a third.
  SimFixture fast(replica_sim(4)), slow1(replica_sim(16)), slow2(replica_sim(16));
  const std::vector<std::string> urls{url_of(fast), url_of(slow1), url_of(slow2)};
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const json m = only_step(d, submit(d, replicas_check(urls, "least_in_flight", 30, 6, 48)))["summary"];
  INFO(m.dump());
  REQUIRE(m["replicas"].size() == 3);
  CHECK(m["failed"] == 0);
  const auto on = [&](std::size_t k) { return m["replicas"][k]["measured"].get<double>(); };
  CHECK(on(0) + on(1) + on(2) == m["measured"].get<double>());
  CHECK(on(0) > 1.5 * on(1));
  CHECK(on(0) > 1.5 * on(2));
  CHECK(served(fast) > 1.5 * std::max(served(slow1), served(slow2)));
  // Each replica's latencies are its own: the slow ones' answers take longer.
  CHECK(m["replicas"][1]["mean_e2el_ms"].get<double>() > 2 * m["replicas"][0]["mean_e2el_ms"].get<double>());
}

TEST_CASE("replicas: a replica killed mid-step is named in the step's outage, the others serving on") {
  TempDir dir;
  const std::vector<std::string> fast{"--decode-base-ms",       "2",    "--decode-per-seq-ms", "0.05",
                                      "--prefill-ms-per-token", "0.001"};
  std::vector<std::unique_ptr<SimProcess>> sims;
  std::vector<std::string> urls;
  for (int k = 0; k < 3; ++k) {
    sims.push_back(std::make_unique<SimProcess>(dir.path("llmsim" + std::to_string(k) + ".log"), fast));
    urls.push_back(sims.back()->url());
  }
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string id = submit(d, replicas_check(urls, "round_robin", 20, 8, 16));
  // Some 4 s into the step's 9 (counted in answers, not in time), replica 3 dies.
  d.wait_for(
      id,
      [](const json& v) {
        const json& p = v["progress"];
        return job_ended(v) || (p.is_object() && p.value("requests_done", 0) >= 80);
      },
      60s);
  sims[2]->kill9();  // as a replica dies: its connections reset, its port refusing
  const json step = only_step(d, id);
  const json& m = step["summary"];
  INFO(m.dump());
  REQUIRE(m.contains("outage"));
  CHECK(m["outage"]["replicas"] == json::array({urls[2]}));
  CHECK(step["verdict"] == "fail");
  CHECK(m["replicas"][2]["failed"].get<std::uint64_t>() >= 10);
  CHECK(m["replicas"][2]["completed"].get<std::uint64_t>() >= 10);  // before it stopped
  for (std::size_t k : {0, 1}) {
    INFO(k);
    CHECK(m["replicas"][k]["failed"] == 0);
    CHECK(m["replicas"][k]["slo_verdict"] == "pass");
  }
  CHECK(m["replicas"][2]["slo_verdict"] == "fail");
}

TEST_CASE("replicas: bad base_urls and a replica off the allow-list are refused, naming the field") {
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::vector<std::string> urls{loopback_url(9), loopback_url(10)};
  struct Case {
    const char* what;
    json target;
    int status;
    const char* field;
  };
  json both = replicas_check(urls, "round_robin", 5, 2, 8)["target"];
  both["base_url"] = urls[0];
  json twice = replicas_check({urls[0], urls[0]}, "round_robin", 5, 2, 8)["target"];
  json not_url = replicas_check({urls[0], "ftp://x"}, "round_robin", 5, 2, 8)["target"];
  json balance = replicas_check(urls, "random", 5, 2, 8)["target"];
  json none = replicas_check(urls, "round_robin", 5, 2, 8)["target"];
  none.erase("base_urls");
  json outside = replicas_check({urls[0], "http://10.20.30.40:8000"}, "round_robin", 5, 2, 8)["target"];
  const std::vector<Case> cases{{"both", both, 400, "/target/base_urls"},
                                {"twice", twice, 400, "/target/base_urls"},
                                {"not a URL", not_url, 400, "/target/base_urls/1"},
                                {"balance", balance, 400, "/target/balance"},
                                {"no URL", none, 400, "/target/base_url"},
                                {"outside the allow-list", outside, 403, "/target/base_urls/1"}};
  for (const Case& c : cases) {
    INFO(c.what);
    json spec = replicas_check(urls, "round_robin", 5, 2, 8);
    spec["target"] = c.target;
    const auto r = d.post("/v1/sweeps", spec.dump());
    INFO(r.body);
    CHECK(r.status == c.status);
    CHECK(json::parse(r.body)["error"]["field"].get<std::string>().rfind(c.field, 0) == 0);
  }
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());
  CHECK(d.get("/healthz").status == 200);
}

// Scenario jobs through capsweepd against capsweep-fleetsim on loopback: each check fails on
// the fleet with the defect and passes on the honest one (lying vs honest readiness, abrupt vs
// graceful scale-down, no stabilisation vs 60 s, a cold start of 8 s), the scale-up reaction
// read through a real Prometheus server, windows stored and exported, and bad specs refused.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "api/schema.hpp"
#include "service/daemon_fixture.hpp"
#include "service/fleet_fixture.hpp"
#include "service/prometheus_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Replicas of 4 sequences (about 7 req/s each with 64 output tokens): queues build quickly.
fleetsim::FleetConfig small_fleet() {
  fleetsim::FleetConfig c;
  c.replica.engine.max_num_seqs = 4;
  c.autoscale = false;
  c.initial_replicas = 1;
  return c;
}

// A scenario aimed at a fleet: 64 output tokens, Poisson arrivals, 2-s windows, the replica
// counts from the gateway's metrics text.
json scenario_job(const FleetFixture& f, const std::string& name, json profile, json checks) {
  return {{"kind", "scenario"},
          {"name", name},
          {"target",
           {{"base_url", f.base()}, {"metrics_url", f.base() + "/metrics"}, {"api", "chat"}, {"model", "sim-8b"}}},
          {"workload",
           {{"prompt_tokens", {{"dist", "fixed"}, {"value", 100}}},
            {"output_tokens", {{"dist", "fixed"}, {"value", 64}}},
            {"seed", 5}}},
          {"arrival", {{"process", "poisson"}}},
          {"scenario",
           {{"capacity_rps", 6},
            {"window_s", 2},
            {"drain_timeout_s", 20},
            {"profile", std::move(profile)},
            {"replicas", {{"metric", {{"ready", "fleet_replicas_ready"}, {"desired", "fleet_replicas_desired"}}}}},
            {"checks", std::move(checks)}}},
          {"slo", {{"ttft_ms", {{"p95", 1000}}}}}};
}

std::string submit(const Daemon& d, const json& spec) {
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  return json::parse(r.body)["id"].get<std::string>();
}

// Waits until the job's scenario step runs (its load has started, within a few ms).
void wait_running(const Daemon& d, const std::string& id) {
  d.wait_for(
      id,
      [](const json& v) {
        const json& p = v["progress"];
        return v["status"] != "queued" && p.is_object() && p.contains("phase") && p["phase"] == "scenario";
      },
      60s);
}

json finished(const Daemon& d, const std::string& id) {
  json v = d.wait_for(
      id, [](const json& s) { return s["status"] != "queued" && s["status"] != "running"; }, 300s);
  INFO(v.dump(1));
  REQUIRE(v["status"] == "succeeded");
  // The job as the API shows it matches the published result schema (every kind).
  static const api::SchemaValidator schema(api::embedded_schema("result.schema.json"));
  auto ok = schema.validate(v);
  INFO((ok ? std::string() : ok.error().field + ": " + ok.error().message));
  CHECK(ok.has_value());
  return v["result"];
}

int cli(const Daemon& d, const std::string& args, const fs::path& out) {
  const auto& ep = d.endpoint();
  return shell_exit(
      fmt::format("{} --server http://127.0.0.1:{} {} > {} 2>&1", CAPSWEEP_CLI_PATH, ep.port(), args, out.string()));
}

}  // namespace

TEST_CASE("scenario: a replica ready before its model loaded fails readiness, an honest one passes") {
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"), {"--max-concurrent-sweeps", "2"});
  auto cfg = small_fleet();
  cfg.load_time_s = 3;
  auto lying_cfg = cfg;
  lying_cfg.readiness = fleetsim::Readiness::lying;
  FleetFixture honest(cfg), lying(lying_cfg);
  // Both first replicas loaded before the jobs start: what is judged is the second replica's
  // moment, not the queue the first one's load leaves (about 1 s of TTFT on an idle machine,
  // near the bound on a busy one).
  honest.wait_ready(1, 20s);
  lying.wait_ready(1, 20s);
  const json profile = json::array({{{"duration_s", 20}, {"rate_rps", 3}}});
  const json checks = {{"readiness", {{"window_s", 4}, {"max_ttft_ms", 1500}}}};
  const std::string a = submit(d, scenario_job(honest, "honest", profile, checks));
  const std::string b = submit(d, scenario_job(lying, "lying", profile, checks));
  wait_running(d, a);
  wait_running(d, b);
  std::this_thread::sleep_for(5s);
  honest.set_replicas(2);
  lying.set_replicas(2);
  const json ra = finished(d, a), rb = finished(d, b);
  INFO(ra["checks"].dump(1));
  INFO(rb["checks"].dump(1));
  INFO(d.get("/v1/sweeps/" + a + "/windows.csv").body);
  INFO(d.get("/v1/sweeps/" + b + "/windows.csv").body);
  CHECK(ra["checks"]["readiness"]["verdict"] == "pass");
  CHECK(ra["verdict"] == "pass");
  // The lying replica took requests and held them for its load time (3 s).
  CHECK(rb["checks"]["readiness"]["verdict"] == "fail");
  CHECK(rb["checks"]["readiness"]["measured"]["max_ttft_ms"].get<double>() > 1500);
  CHECK(rb["verdict"] == "fail");
  // Each saw the ready replicas go 1 -> 2.
  for (const json* r : {&ra, &rb}) {
    bool grew = false;
    for (const auto& e : (*r)["events"]) grew |= e["kind"] == "replicas" && e["which"] == "ready" && e["to"] == 2;
    CHECK(grew);
  }
  // The CLI: the verdict's exit code (3: fail) and the windows' table.
  CHECK(cli(d, "verdict " + b, dir.path("verdict.txt")) == 3);
  CHECK(read_text(dir.path("verdict.txt")).find("readiness") != std::string::npos);
  CHECK(cli(d, "verdict " + a, dir.path("verdict-a.txt")) == 0);
  CHECK(cli(d, "windows " + b, dir.path("windows.txt")) == 0);
  CHECK(count_of(read_text(dir.path("windows.txt")), "\n") == 11);  // the header and 10 windows
}

TEST_CASE("scenario: readiness is judged on a target the job did not warm itself, from one replica and from zero") {
  // A replica loading its model for 8 s: the lying one answers /health 200 at once and holds
  // requests until loaded, the honest one says 503 until then. Only the readiness check, with
  // its default bound: the job sends nothing before its load (no calibration request that
  // would wait out the load and leave a warm target to judge), and each moment of readiness is
  // judged by the requests scheduled after it.
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"), {"--max-concurrent-sweeps", "4"});
  auto cfg = small_fleet();
  cfg.load_time_s = 8;
  cfg.replica.engine.max_num_seqs = 16;  // room for the requests held while it loads
  auto lying_cfg = cfg;
  lying_cfg.readiness = fleetsim::Readiness::lying;
  auto from_zero = [](fleetsim::FleetConfig c) {
    c.autoscale = true;
    c.initial_replicas = 0;
    c.hpa.min_replicas = 0;
    c.hpa.sync_period = 1000ms;
    c.hpa.idle_to_zero = 600'000ms;
    return c;
  };
  FleetFixture honest(cfg), lying(lying_cfg), honest0(from_zero(cfg)), lying0(from_zero(lying_cfg));
  const json profile = json::array({{{"duration_s", 16}, {"rate_rps", 1}}});
  const json checks = {{"readiness", {{"window_s", 4}}}};
  std::vector<std::string> ids;
  for (const FleetFixture* f : {&honest, &lying, &honest0, &lying0}) {
    json spec = scenario_job(*f, "readiness", profile, checks);
    spec["scenario"]["readiness_url"] = f->base() + "/health";
    ids.push_back(submit(d, spec));
  }
  const char* expected[] = {"pass", "fail", "pass", "fail"};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const json r = finished(d, ids[i]);
    INFO(i << ": " << r["checks"].dump(1));
    const json& c = r["checks"]["readiness"];
    CHECK(c["verdict"] == expected[i]);
    // The job's verdict is the check's, unless the load generator fell behind its schedule
    // (four fleets and four jobs share this machine): then a pass is only inconclusive, and says why.
    const bool held_back =
        r["verdict"] == "inconclusive" && r["warnings"].dump().find("generator_limited") != std::string::npos;
    CHECK((r["verdict"] == expected[i] || (held_back && expected[i] == std::string("pass"))));
    // Each moment lists the first requests after it with their TTFT.
    REQUIRE(c["measured"]["moments"].size() >= 1);
    bool listed = false;
    for (const auto& m : c["measured"]["moments"]) listed |= !m["first_requests"].empty();
    CHECK(listed);
    // The lying targets' first requests after "ready" waited seconds for a first token.
    if (expected[i] == std::string("fail")) CHECK(c["measured"]["max_ttft_ms"].get<double>() > 4000);
  }
  // No request went out before the load: the log says each job skipped its calibration.
  CHECK(count_of(read_text(dir.path("d.log")), "prompt lengths not calibrated") == 4);
}

TEST_CASE("scenario: an abrupt scale-down cuts streams and fails, a graceful one passes") {
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"), {"--max-concurrent-sweeps", "2"});
  auto cfg = small_fleet();
  cfg.initial_replicas = 2;
  cfg.replica.engine.decode_base_ms = 30;  // 64 tokens: about 2 s a stream
  auto abrupt_cfg = cfg;
  abrupt_cfg.termination = fleetsim::Termination::abrupt;
  FleetFixture graceful(cfg), abrupt(abrupt_cfg);
  const json profile = json::array({{{"duration_s", 16}, {"rate_rps", 2}}});
  const json checks = {{"scale_down", json::object()}};
  const std::string a = submit(d, scenario_job(graceful, "graceful", profile, checks));
  const std::string b = submit(d, scenario_job(abrupt, "abrupt", profile, checks));
  wait_running(d, a);
  wait_running(d, b);
  std::this_thread::sleep_for(6s);
  graceful.set_replicas(1);
  abrupt.set_replicas(1);
  const json ra = finished(d, a), rb = finished(d, b);
  INFO(ra.dump(1));
  INFO(rb.dump(1));
  CHECK(ra["checks"]["scale_down"]["verdict"] == "pass");
  CHECK(ra["checks"]["scale_down"]["measured"] == 0);
  CHECK(rb["checks"]["scale_down"]["verdict"] == "fail");
  CHECK(rb["checks"]["scale_down"]["measured"].get<int>() >= 1);
  // The windows' CSV shows the cut streams too.
  auto csv = d.get("/v1/sweeps/" + b + "/windows.csv");
  REQUIRE(csv.status == 200);
  CHECK(csv.body.rfind("index,t_start_s,offered_rps", 0) == 0);
  CHECK(count_of(csv.body, "\n") == 9);  // the header and 8 windows
}

namespace {

// The cells of each line of a CSV export (no quoting in the columns read here), header first.
std::vector<std::vector<std::string>> csv_rows(const std::string& body) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> cells;
    std::istringstream cs(line);
    for (std::string cell; std::getline(cs, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(std::move(cells));
  }
  return rows;
}

}  // namespace

TEST_CASE(
    "scenario: a trace follows the profile's rate with its bursts, sessions arrive by it, a warm cache is warmed") {
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"));
  auto cfg = small_fleet();
  cfg.replica.engine.max_num_seqs = 64;
  cfg.replica.engine.decode_base_ms = 2;
  FleetFixture fleet(cfg);
  // 20 rows in bursts of two, 300 ms apart: the profile sets the rate, the trace the shape.
  std::string trace;
  for (int k = 0; k < 20; ++k)
    trace += json{{"timestamp", 300 * (k / 2)}, {"input_length", 64}, {"output_length", 4}}.dump() + "\n";
  const auto up = d.post("/v1/datasets?format=trace", trace, {{"Content-Type", "application/x-ndjson"}});
  REQUIRE(up.status == 201);
  const json profile = json::array({{{"duration_s", 6}, {"rate_rps", 4}}, {{"duration_s", 6}, {"rate_rps", 12}}});
  json spec = scenario_job(fleet, "trace", profile, json::object());
  spec["workload"] = {{"dataset", {{"id", json::parse(up.body)["id"]}}}};
  spec["arrival"] = {{"process", "trace"}};
  json at_speed = spec;
  at_speed["arrival"]["speed"] = 2;
  auto bad = d.post("/v1/sweeps", at_speed.dump());
  CHECK(bad.status == 400);
  CHECK(json::parse(bad.body)["error"].value("field", "") == "/arrival/speed");
  const std::string id = submit(d, spec);
  const json r = finished(d, id);
  CHECK(r["conditions"]["arrival"] == "trace");
  // Each 2-s window offers the profile's rate: 8 requests, then 24 (a burst of two may straddle).
  const auto windows = csv_rows(d.get("/v1/sweeps/" + id + "/windows.csv").body);
  REQUIRE(windows.size() == 7);
  REQUIRE(windows[0][2] == "offered_rps");
  for (std::size_t w = 1; w < windows.size(); ++w) {
    INFO("window " << w);
    CHECK(std::stod(windows[w][2]) == Approx(w <= 3 ? 4 : 12).margin(1.01));
  }
  // The whole: the profile's 96 expected requests (its pairs are the schedule's, unit-tested).
  CHECK(r["summary"]["scheduled"].get<double>() == Approx(96).margin(2));

  // Sessions of 3 turns arrive at the profile's rate; turn k carries the history before it.
  json chats = scenario_job(fleet, "sessions", json::array({{{"duration_s", 8}, {"rate_rps", 2}}}), json::object());
  chats["workload"] = {{"prompt_tokens", {{"dist", "fixed"}, {"value", 30}}},
                       {"output_tokens", {{"dist", "fixed"}, {"value", 20}}},
                       {"seed", 4},
                       {"sessions", {{"turns", 3}, {"think_time_ms", {{"dist", "fixed"}, {"value", 100}}}}}};
  const std::string sid = submit(d, chats);
  finished(d, sid);
  // A scenario keeps no per-request rows (its windows are the record): its step's summary has
  // each turn's prompt as the server counted it.
  const json summary = d.get_json("/v1/sweeps/" + sid + "/steps")["steps"][0]["summary"];
  INFO(summary.dump(1));
  CHECK(summary["sessions"]["broken"] == 0);
  CHECK(summary["sessions"]["started"].get<double>() >= 8);
  REQUIRE(summary["turns"].size() == 3);
  for (std::size_t k = 1; k <= 3; ++k) {
    const json& t = summary["turns"][k - 1];
    CHECK(t["completed"].get<double>() >= 1);
    CHECK(t["max_prompt_tokens"].get<double>() ==
          Approx(30.0 * static_cast<double>(k) + 20.0 * static_cast<double>(k - 1)));
    CHECK(t["mean_prompt_tokens"].get<double>() ==
          Approx(30.0 * static_cast<double>(k) + 20.0 * static_cast<double>(k - 1)));
  }

  // A warm prefix cache: the scenario's prompts are salted and each shared prefix sent once first.
  json warm = scenario_job(fleet, "warm", json::array({{{"duration_s", 4}, {"rate_rps", 2}}}), json::object());
  warm["workload"]["prefix"] = {{"tokens", 64}, {"count", 3}, {"cache", "warm"}};
  const std::string wid = submit(d, warm);
  finished(d, wid);
  const json pc = d.get_json("/v1/sweeps/" + wid + "/steps")["steps"][0]["summary"]["prefix_cache"];
  INFO(pc.dump());
  CHECK(pc["state"] == "warm");
  CHECK(pc["warm_requests"] == 3);
  CHECK(pc["warm_failed"] == 0);
}

TEST_CASE("scenario: a cold start from zero replicas is measured within 10% of the load time") {
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"));
  auto cfg = small_fleet();
  cfg.autoscale = true;
  cfg.initial_replicas = 0;
  cfg.hpa.min_replicas = 0;
  cfg.hpa.sync_period = 1000ms;
  cfg.hpa.idle_to_zero = 600'000ms;
  cfg.load_time_s = 8;
  // Room for the backlog that builds while the model loads: the first request's TTFT is the
  // load time, not a wait behind later requests for a sequence slot.
  cfg.replica.engine.max_num_seqs = 16;
  FleetFixture fleet(cfg);
  json spec = scenario_job(fleet, "cold", json::array({{{"duration_s", 14}, {"rate_rps", 1}}}),
                           {{"cold_start", {{"expected_s", 8}, {"tolerance_pct", 10}}}, {"readiness", json::object()}});
  spec["scenario"]["readiness_url"] = fleet.base() + "/health";
  const json r = finished(d, submit(d, spec));
  INFO(r.dump(1));
  CHECK(r["checks"]["cold_start"]["verdict"] == "pass");
  const double ttft = r["checks"]["cold_start"]["measured"]["first_ttft_s"].get<double>();
  CHECK(ttft >= 7.2);
  CHECK(ttft <= 8.8);
  // The readiness URL answered 200 once the replica had loaded, about 8 s in.
  REQUIRE(r["checks"]["cold_start"]["measured"]["ready_after_s"].is_number());
  CHECK(r["checks"]["cold_start"]["measured"]["ready_after_s"].get<double>() == Approx(8).margin(1.5));
  CHECK(r["checks"]["readiness"]["verdict"] == "pass");
  // Expecting 4 s fails.
  json wrong = spec;
  wrong["scenario"]["checks"] = {{"cold_start", {{"expected_s", 4}, {"tolerance_pct", 10}}}};
  // A fleet scaled to zero again: a new one.
  FleetFixture again(cfg);
  wrong["target"]["base_url"] = again.base();
  wrong["target"]["metrics_url"] = again.base() + "/metrics";
  wrong["scenario"]["readiness_url"] = again.base() + "/health";
  const json w = finished(d, submit(d, wrong));
  CHECK(w["checks"]["cold_start"]["verdict"] == "fail");
}

TEST_CASE("scenario: load hovering at the threshold flaps a fleet without a scale-down window, not one with 60 s") {
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"), {"--max-concurrent-sweeps", "2"});
  auto cfg = small_fleet();
  cfg.autoscale = true;
  cfg.hpa.metric = fleetsim::Metric::in_flight;
  cfg.hpa.target = 3;
  cfg.hpa.sync_period = 1000ms;
  cfg.hpa.max_replicas = 4;
  cfg.load_time_s = 0.5;
  auto none = cfg;
  none.hpa.scale_down_window = 0ms;
  auto steady = cfg;
  steady.hpa.scale_down_window = 60'000ms;
  FleetFixture flapping(none), stable(steady);
  // 8 req/s ± 6 every 10 s: above one replica's capacity at the crest, idle-ish at the trough.
  const json profile =
      json::array({{{"duration_s", 40}, {"rate_rps", 8}, {"oscillate", {{"amplitude_rps", 6}, {"period_s", 10}}}}});
  const json checks = {{"flapping", {{"max_direction_changes", 1}}}};
  const std::string a = submit(d, scenario_job(flapping, "no window", profile, checks));
  const std::string b = submit(d, scenario_job(stable, "60 s window", profile, checks));
  const json ra = finished(d, a), rb = finished(d, b);
  INFO(ra.dump(1));
  INFO(rb.dump(1));
  CHECK(ra["checks"]["flapping"]["verdict"] == "fail");
  CHECK(ra["checks"]["flapping"]["measured"].get<int>() >= 2);
  CHECK(rb["checks"]["flapping"]["verdict"] == "pass");
  CHECK(rb["checks"]["flapping"]["measured"].get<int>() <= 1);
}

TEST_CASE("scenario: bad specs get a 4xx naming the field and store nothing") {
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"));
  auto cfg = small_fleet();
  FleetFixture fleet(cfg);
  const json good = scenario_job(fleet, "x", json::array({{{"duration_s", 10}, {"rate_rps", 1}}}), json::object());
  auto refused = [&](json spec, int status, const std::string& field) {
    auto r = d.post("/v1/sweeps", spec.dump());
    INFO(r.body);
    CHECK(r.status == status);
    const json e = json::parse(r.body, nullptr, false);
    CHECK(e["error"].value("field", "?") == field);
  };
  json s = good;
  s["scenario"]["profile"] = json::array();
  refused(s, 400, "/scenario/profile");
  s = good;
  s["scenario"]["profile"][0]["duration_s"] = -1;
  refused(s, 400, "/scenario/profile/0/duration_s");
  s = good;
  s["scenario"]["profile"][0]["duration_s"] = 86400;  // over the service's max_total_sweep_s
  refused(s, 400, "/scenario/profile");
  s = good;
  s["scenario"].erase("capacity_rps");
  s["scenario"]["profile"][0] = {{"duration_s", 10}, {"capacity_x", 1.5}};
  refused(s, 400, "/scenario/profile/0/capacity_x");
  s["scenario"]["from_sweep"] = "sw-0123456789abcdef";
  refused(s, 409, "/scenario/from_sweep");
  s = good;
  s["scenario"]["replicas"] = {{"prometheus", {{"url", "http://192.0.2.10:9090"}, {"ready", "up"}}}};
  refused(s, 403, "/scenario/replicas/prometheus/url");
  s = good;
  s["scenario"]["readiness_url"] = "http://192.0.2.10/health";
  refused(s, 403, "/scenario/readiness_url");
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());
  // An unfinished sweep is no capacity either (409).
  json sweep = sim_job(fleet.base(), "running");
  sweep["sweep"] = {{"steps", 2}, {"step_duration_s", 30}, {"warmup_s", 1}};
  const std::string running = submit(d, sweep);
  s = good;
  s["scenario"].erase("capacity_rps");
  s["scenario"]["from_sweep"] = running;
  refused(s, 409, "/scenario/from_sweep");
  d.del("/v1/sweeps/" + running);
  CHECK(d.alive());
}

TEST_CASE("scenario: the scale-up reaction read through a real Prometheus server matches the controller's settings") {
  REQUIRE(shell_exit("command -v prometheus >/dev/null") == 0);
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"));
  auto cfg = small_fleet();
  cfg.autoscale = true;
  cfg.hpa.metric = fleetsim::Metric::waiting;  // the queue: none at 0.3 x, growing at 1.5 x
  cfg.hpa.target = 1;
  cfg.hpa.sync_period = 2000ms;
  cfg.hpa.max_replicas = 4;
  cfg.hpa.scale_down_window = 300'000ms;
  cfg.load_time_s = 3;
  FleetFixture fleet(cfg);
  PrometheusServer prom(dir, fleet.port());
  REQUIRE(prom.wait_for_series("kube_deployment_status_replicas_ready", 30s));
  // 10 s at 0.3 x the capacity, then 20 s at 1.5 x; 1-s windows. The reaction can take the
  // sync period (2 s) and the load time (3 s), plus a window and Prometheus' scrape interval
  // (1 s each) to be seen.
  json spec =
      scenario_job(fleet, "spike",
                   json::array({{{"duration_s", 10}, {"capacity_x", 0.3}}, {{"duration_s", 20}, {"capacity_x", 1.5}}}),
                   {{"scale_up_reaction_s", {{"max", 2 + 3 + 1 + 1}}},
                    {"slo_during_scale_up", {{"max_error_rate", 0.01}, {"ttft_p95_ms", 20000}}}});
  spec["scenario"]["window_s"] = 1;
  spec["scenario"]["replicas"] = {{"prometheus",
                                   {{"url", prom.url()},
                                    {"ready", "sum(kube_deployment_status_replicas_ready{deployment=\"llm\"})"},
                                    {"desired", "sum(kube_deployment_spec_replicas{deployment=\"llm\"})"}}}};
  const std::string id = submit(d, spec);
  // While it runs, capsweepd's /metrics follows its latest window.
  wait_running(d, id);
  std::this_thread::sleep_for(6s);
  const std::string metrics = d.get("/metrics").body;
  CHECK(metrics.find("capsweepd_scenario_window_offered_rps{sweep=\"" + id + "\"}") != std::string::npos);
  CHECK(d.get_json("/v1/sweeps/" + id)["progress"]["window"].is_object());
  const json r = finished(d, id);
  INFO(r.dump(1));
  const json& up = r["checks"]["scale_up_reaction_s"];
  CHECK(up["verdict"] == "pass");
  REQUIRE(up["measured"].is_number());
  CHECK(up["measured"].get<double>() >= 3);  // a replica cannot serve before it has loaded
  CHECK(up["measured"].get<double>() <= 7);
  CHECK(r["conditions"]["spike_start_s"] == 10);
  CHECK(r["checks"]["slo_during_scale_up"]["verdict"] == "pass");
  // The windows carry the counts Prometheus answered.
  const json windows = d.get_json("/v1/sweeps/" + id + "/windows")["windows"];
  REQUIRE(windows.size() == 30);
  CHECK(windows[0]["ready"] == 1);
  CHECK(windows.back()["ready"].get<double>() >= 2);
  // A query Prometheus rejects fails the job with its message, before any load.
  spec["scenario"]["replicas"]["prometheus"]["ready"] = "sum(";
  const std::string bad = submit(d, spec);
  const json v = d.wait_for(
      bad, [](const json& s) { return s["status"] != "queued" && s["status"] != "running"; }, 60s);
  CHECK(v["status"] == "failed");
  CHECK(v["error"].get<std::string>().find("scenario.replicas") != std::string::npos);
  CHECK(d.alive());
}

TEST_CASE("scenario: metric_choice ranks the queue above a GPU utilisation that saturates early") {
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"));
  auto cfg = small_fleet();
  cfg.replica.engine.max_num_seqs = 16;  // about 20 req/s; the utilisation is 100% from 4 in flight
  cfg.gpu_saturation_in_flight = 4;
  FleetFixture fleet(cfg);
  // A ramp from 2 to 30 req/s: the queue and the TTFT grow only in its last third, long after
  // the utilisation stopped moving.
  const json r = finished(
      d,
      submit(d, scenario_job(fleet, "ramp", json::array({{{"duration_s", 24}, {"rate_rps", 2}, {"to_rate_rps", 30}}}),
                             {{"metric_choice", json::object()}})));
  INFO(r["checks"].dump(1));
  const json& m = r["checks"]["metric_choice"];
  CHECK(m["verdict"] == "advisory");
  const json ranking = m["measured"]["ranking"];
  auto rank = [&](const std::string& name) {
    for (std::size_t i = 0; i < ranking.size(); ++i)
      if (ranking[i] == name) return static_cast<int>(i);
    return 1000;
  };
  CHECK(rank("vllm:num_requests_waiting") < rank("DCGM_FI_DEV_GPU_UTIL"));
  CHECK(rank("fleetsim_replica_in_flight") < rank("DCGM_FI_DEV_GPU_UTIL"));
  for (const auto& g : m["measured"]["gauges"]) {
    if (g["name"] == "vllm:num_requests_waiting") CHECK(g["tracks_user_impact"] == true);
    if (g["name"] == "DCGM_FI_DEV_GPU_UTIL") CHECK(g["tracks_user_impact"] == false);
  }
}

TEST_CASE("scenario: the card's loop - a sweep of one replica sets the controller, a 150% spike holds the SLO") {
  // (and on a fleet that never scales, the same spike fails the reaction, the SLO and recovery)
  TempDir dir;
  Daemon d(dir.path("db.sqlite"), dir.path("d.log"));
  // 1. One replica, swept.
  auto one_cfg = small_fleet();
  one_cfg.replica.engine.max_num_seqs = 16;  // about 19 req/s within the SLO
  FleetFixture one(one_cfg);
  json sweep = sim_job(one.base(), "one replica");
  sweep["target"]["api"] = "chat";
  sweep["arrival"] = {{"process", "poisson"}};
  // Steps long enough for a p95 at the ladder's rates (a low rate's step runs longer).
  sweep["sweep"] = {{"steps", 3},
                    {"step_duration_s", 8},
                    {"warmup_s", 1},
                    {"baseline_requests", 5},
                    {"probe_requests", 128},
                    {"tolerance", 0.15},
                    {"max_step_duration_s", 16},
                    {"max_steps", 8}};
  const std::string sw = submit(d, sweep);
  const json swept = finished(d, sw);
  INFO(swept.dump(1));
  REQUIRE(swept["max_slo_rate_rps"].is_number());
  const double capacity = swept["max_slo_rate_rps"].get<double>();
  // 2. Its thresholds.
  const json thresholds = d.get_json("/v1/sweeps/" + sw + "/autoscale?format=json");
  INFO(thresholds.dump(1));
  REQUIRE(thresholds["target_inflight_per_replica"].is_number());
  // 3. The fleet's controller configured from them: in flight per replica, as the ScaledObject.
  auto fleet_cfg = one_cfg;
  fleet_cfg.autoscale = true;
  fleet_cfg.hpa.metric = fleetsim::Metric::in_flight;
  fleet_cfg.hpa.target = thresholds["target_inflight_per_replica"].get<double>();
  fleet_cfg.hpa.sync_period = 2000ms;
  fleet_cfg.hpa.max_replicas = 6;
  fleet_cfg.hpa.scale_down_window = 300'000ms;
  fleet_cfg.load_time_s = 2;
  FleetFixture fleet(fleet_cfg);
  // 4. A spike to 150% of the measured capacity, the capacity taken from the sweep (from_sweep).
  json spec = scenario_job(
      fleet, "loop", json::array({{{"duration_s", 8}, {"capacity_x", 0.5}}, {{"duration_s", 30}, {"capacity_x", 1.5}}}),
      {{"scale_up_reaction_s",
        {{"max", 2 + 2 + 2}}},  // sync + load + a window
                                // TTFT p95 while it scales: about 1.4 s with the controller, about 4 s without one.
       {"slo_during_scale_up", {{"max_error_rate", 0.01}, {"ttft_p95_ms", 2500}}},
       {"recovery_s", {{"max", 20}, {"windows", 2}}}});
  spec["scenario"].erase("capacity_rps");
  spec["scenario"]["from_sweep"] = sw;
  const std::string id = submit(d, spec);
  const json r = finished(d, id);
  INFO(r.dump(1));
  CHECK(r["conditions"]["capacity_rps"].get<double>() == Approx(capacity));
  CHECK(r["checks"]["scale_up_reaction_s"]["verdict"] == "pass");
  CHECK(r["checks"]["slo_during_scale_up"]["verdict"] == "pass");
  CHECK(r["checks"]["recovery_s"]["verdict"] == "pass");
  CHECK(r["verdict"] == "pass");
  // 5. The same spike on a fleet whose controller never adds a replica: the three checks fail.
  auto stuck_cfg = one_cfg;  // one replica, no controller
  FleetFixture stuck(stuck_cfg);
  spec["target"]["base_url"] = stuck.base();
  spec["target"]["metrics_url"] = stuck.base() + "/metrics";
  const json f = finished(d, submit(d, spec));
  INFO(f.dump(1));
  CHECK(f["checks"]["scale_up_reaction_s"]["verdict"] == "fail");
  CHECK(f["checks"]["slo_during_scale_up"]["verdict"] == "fail");
  CHECK(f["checks"]["recovery_s"]["verdict"] == "fail");
  CHECK(f["verdict"] == "fail");
}

// The HTML report end to end: a real sweep, `capsweep report`, then headless Chromium loads
// the file (no network, no scripts) and we check what it rendered. The screenshot is kept as
// a test artefact under the build directory (artefacts/report.png).
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"
#include "service/fleet_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

struct Rendered {
  std::string dom, log;
};

// Writes job `id`'s report with the CLI, keeps it and a screenshot as `name`.html/.png under
// the artefacts, and returns the DOM headless Chromium built from it (no network, no script).
Rendered render_with_chromium(const TempDir& dir, const std::string& cli, const std::string& id,
                              const std::string& name) {
  const fs::path html = dir.path(name + ".html");
  REQUIRE(shell_exit(cli + " report " + id + " -o '" + html.string() + "' 2>/dev/null") == 0);
  REQUIRE(fs::file_size(html) > 2000);
  const fs::path artefacts = fs::path(CAPSWEEP_ARTEFACT_DIR);
  fs::create_directories(artefacts);
  fs::copy_file(html, artefacts / (name + ".html"), fs::copy_options::overwrite_existing);
  const fs::path png = artefacts / (name + ".png");
  fs::remove(png);
  // No network at all (a proxy that does not exist), a fresh profile, no sandbox (tests may run as root).
  const std::string chrome =
      std::string("chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage ") +
      "--no-first-run --proxy-server=127.0.0.1:9 --user-data-dir='" + dir.path("profile-" + name).string() +
      "' --hide-scrollbars --enable-logging=stderr --v=0 ";
  const int shot = shell_exit("timeout 120 " + chrome + "--window-size=1400,2600 --screenshot='" + png.string() +
                              "' 'file://" + html.string() + "' >'" + dir.path("shot.log").string() + "' 2>&1");
  INFO(read_text(dir.path("shot.log")));
  REQUIRE(shot == 0);
  CHECK(fs::exists(png));
  CHECK(fs::file_size(png) > 20'000);  // a rendered page, not a blank one
  const int dom = shell_exit("timeout 120 " + chrome + "--dump-dom 'file://" + html.string() + "' >'" +
                             dir.path("dom.html").string() + "' 2>'" + dir.path("dom.log").string() + "'");
  REQUIRE(dom == 0);
  Rendered r{read_text(dir.path("dom.html")), read_text(dir.path("dom.log"))};
  // Without errors: no console message and no failed load.
  INFO(r.log);
  CHECK(r.log.find("CONSOLE") == std::string::npos);
  CHECK(r.log.find("Failed to load") == std::string::npos);
  CHECK(r.log.find("net::ERR") == std::string::npos);
  return r;
}

}  // namespace

TEST_CASE("report e2e: headless Chromium renders the report of a real sweep with its charts") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string base = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  json spec = sim_job(base, "report e2e");
  spec["sweep"] = {
      {"steps", 3},       {"step_duration_s", 5}, {"warmup_s", 1}, {"baseline_requests", 3}, {"probe_requests", 128},
      {"tolerance", 0.3}, {"max_steps", 5}};
  std::ofstream(dir.path("spec.json")) << spec.dump();
  const std::string server = "http://127.0.0.1:" + std::to_string(d.endpoint().port());
  const std::string cli = std::string("'") + CAPSWEEP_CLI_PATH + "' --server " + server;
  REQUIRE(shell_exit(cli + " submit '" + dir.path("spec.json").string() + "' --wait >/dev/null 2>&1") == 0);
  const std::string id = json::parse(d.get("/v1/sweeps?limit=1").body)["sweeps"][0]["id"];
  const Rendered r = render_with_chromium(dir, cli, id, "report");
  const std::string& rendered = r.dom;
  // The page loaded: the browser's DOM has the verdict, the charts and their data.
  CHECK(rendered.find("id=\"verdict\"") != std::string::npos);
  CHECK(count_of(rendered, "<svg class=\"chart\"") >= 3);
  CHECK(count_of(rendered, "<polyline") >= 3);
  CHECK(count_of(rendered, "<circle") >= 6);
  CHECK(rendered.find("id=\"steps\"") != std::string::npos);
}

TEST_CASE("report e2e: a check's report renders its distributions and its step over time") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = sim_job("http://127.0.0.1:" + std::to_string(sim.endpoint().port()), "check report e2e");
  spec["kind"] = "check";
  spec["check"] = {{"rate_rps", 10}, {"duration_s", 6}, {"warmup_s", 1}};
  spec["target"]["labels"] = {{"gpu", "none (simulated)"}};
  std::ofstream(dir.path("spec.json")) << spec.dump();
  const std::string cli =
      std::string("'") + CAPSWEEP_CLI_PATH + "' --server http://127.0.0.1:" + std::to_string(d.endpoint().port());
  const int code = shell_exit(cli + " submit '" + dir.path("spec.json").string() + "' --wait >/dev/null 2>&1");
  REQUIRE((code == 0 || code == 4));  // pass, or inconclusive on a short check's few samples
  const std::string id = json::parse(d.get("/v1/sweeps?limit=1").body)["sweeps"][0]["id"];
  const Rendered r = render_with_chromium(dir, cli, id, "check-report");
  CHECK(r.dom.find("capsweep check report") != std::string::npos);
  CHECK(r.dom.find("id=\"distributions\"") != std::string::npos);
  CHECK(r.dom.find("id=\"timeline\"") != std::string::npos);
  CHECK(count_of(r.dom, "<svg class=\"chart\"") == 5);  // three CDFs, TTFT and in flight over time
  CHECK(count_of(r.dom, "<polyline") >= 5);
  CHECK(r.dom.find("gpu=none (simulated)") != std::string::npos);
  CHECK(r.dom.find("against offered rate") == std::string::npos);
}

TEST_CASE("report e2e: a scenario's report draws its timeline with the replicas and the checks") {
  fleetsim::FleetConfig cfg;
  cfg.replica.engine.max_num_seqs = 4;
  cfg.autoscale = true;
  cfg.hpa.metric = fleetsim::Metric::waiting;
  cfg.hpa.target = 1;
  cfg.hpa.sync_period = std::chrono::milliseconds(1000);
  cfg.load_time_s = 1;
  FleetFixture fleet(cfg);
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = sim_job(fleet.base(), "scenario report e2e");
  spec["kind"] = "scenario";
  spec["scenario"] = {
      {"capacity_rps", 6},
      {"window_s", 2},
      {"profile", {{{"duration_s", 6}, {"capacity_x", 0.3}}, {{"duration_s", 10}, {"capacity_x", 1.5}}}},
      {"replicas", {{"metric", {{"ready", "fleet_replicas_ready"}, {"desired", "fleet_replicas_desired"}}}}},
      {"checks", {{"scale_up_reaction_s", {{"max", 6}}}, {"recovery_s", {{"max", 10}, {"windows", 2}}}}}};
  std::ofstream(dir.path("spec.json")) << spec.dump();
  const std::string cli =
      std::string("'") + CAPSWEEP_CLI_PATH + "' --server http://127.0.0.1:" + std::to_string(d.endpoint().port());
  const int code = shell_exit(cli + " submit '" + dir.path("spec.json").string() + "' --wait >/dev/null 2>&1");
  REQUIRE((code == 0 || code == 3 || code == 4));  // a verdict, whichever
  const std::string id = json::parse(d.get("/v1/sweeps?limit=1").body)["sweeps"][0]["id"];
  const Rendered r = render_with_chromium(dir, cli, id, "scenario-report");
  CHECK(r.dom.find("capsweep scenario report") != std::string::npos);
  CHECK(r.dom.find("id=\"scenario-timeline\"") != std::string::npos);
  CHECK(count_of(r.dom, "<svg class=\"chart\"") == 3);  // rate, TTFT p95, replicas
  CHECK(r.dom.find(">spike<") != std::string::npos);
  CHECK(r.dom.find("id=\"scenario-checks\"") != std::string::npos);
  CHECK(r.dom.find("scale_up_reaction_s") != std::string::npos);
  CHECK(r.dom.find("recovery_s") != std::string::npos);
}

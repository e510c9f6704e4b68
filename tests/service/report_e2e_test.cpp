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

using namespace capsweep;
using namespace capsweep::testing;
using json = nlohmann::json;
namespace fs = std::filesystem;

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
  const fs::path html = dir.path("report.html");
  REQUIRE(shell_exit(cli + " report " + id + " -o '" + html.string() + "' 2>/dev/null") == 0);
  REQUIRE(fs::file_size(html) > 2000);

  const fs::path artefacts = fs::path(CAPSWEEP_ARTEFACT_DIR);
  fs::create_directories(artefacts);
  fs::copy_file(html, artefacts / "report.html", fs::copy_options::overwrite_existing);
  const fs::path png = artefacts / "report.png";
  fs::remove(png);
  // No network at all (a proxy that does not exist), a fresh profile, no sandbox (tests may run as root).
  const std::string chrome =
      std::string("chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage ") +
      "--no-first-run --proxy-server=127.0.0.1:9 --user-data-dir='" + dir.path("profile").string() +
      "' --hide-scrollbars --enable-logging=stderr --v=0 ";
  const int shot = shell_exit("timeout 120 " + chrome + "--window-size=1400,2600 --screenshot='" + png.string() +
                              "' 'file://" + html.string() + "' >'" + dir.path("shot.log").string() + "' 2>&1");
  INFO(read_text(dir.path("shot.log")));
  REQUIRE(shot == 0);
  CHECK(fs::exists(png));
  CHECK(fs::file_size(png) > 20'000);  // a rendered page, not a blank one
  const int dom = shell_exit("timeout 120 " + chrome + "--dump-dom 'file://" + html.string() + "' >'" +
                             dir.path("dom.html").string() + "' 2>'" + dir.path("dom.log").string() + "'");
  const std::string rendered = read_text(dir.path("dom.html"));
  const std::string log = read_text(dir.path("dom.log"));
  INFO(log);
  REQUIRE(dom == 0);
  // The page loaded: the browser's DOM has the verdict, the charts and their data.
  CHECK(rendered.find("id=\"verdict\"") != std::string::npos);
  CHECK(count_of(rendered, "<svg class=\"chart\"") >= 3);
  CHECK(count_of(rendered, "<polyline") >= 3);
  CHECK(count_of(rendered, "<circle") >= 6);
  CHECK(rendered.find("id=\"steps\"") != std::string::npos);
  // Without errors: no console message and no failed load.
  CHECK(log.find("CONSOLE") == std::string::npos);
  CHECK(log.find("Failed to load") == std::string::npos);
  CHECK(log.find("net::ERR") == std::string::npos);
}

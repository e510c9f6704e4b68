// The capsweep CLI against a running capsweepd: every subcommand and every exit code.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using json = nlohmann::json;

namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
};

// Runs `capsweep ARGS` (arguments are single-quoted for the shell) with stdout and stderr
// captured.
CliRun cli(const TempDir& dir, const std::vector<std::string>& args, const std::string& cwd = {}) {
  std::string cmd = (cwd.empty() ? std::string() : "cd '" + cwd + "' && ") + "'" + CAPSWEEP_CLI_PATH + "'";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " >'" + dir.path("cli.out").string() + "' 2>'" + dir.path("cli.err").string() + "' </dev/null";
  CliRun r;
  r.code = shell_exit(cmd);
  r.out = read_text(dir.path("cli.out"));
  r.err = read_text(dir.path("cli.err"));
  return r;
}

std::string write(const TempDir& dir, const std::string& name, const json& j) {
  std::ofstream(dir.path(name)) << j.dump(2);
  return dir.path(name).string();
}

json job(const SimFixture& sim) {
  return sim_job("http://127.0.0.1:" + std::to_string(sim.endpoint().port()), "cli");
}

json check(const SimFixture& sim, double rate, double duration) {
  json j = job(sim);
  j["kind"] = "check";
  j["check"] = {{"rate_rps", rate}, {"duration_s", duration}, {"warmup_s", 1}};
  return j;
}

}  // namespace

TEST_CASE("cli: every subcommand and exit code against a running capsweepd") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string server = "http://127.0.0.1:" + std::to_string(d.endpoint().port());
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server});
    return cli(dir, args);
  };

  // Usage: help everywhere (0); unknown subcommands and missing arguments (1).
  CHECK(cli(dir, {"--help"}).code == 0);
  for (const char* sub : {"submit", "check", "status", "watch", "verdict", "steps", "list", "cancel", "autoscale"}) {
    INFO(sub);
    const auto h = cli(dir, {sub, "--help"});
    CHECK(h.code == 0);
    CHECK(h.out.find("Usage") != std::string::npos);
  }
  CHECK(cli(dir, {"bogus"}).code == 1);
  CHECK(cli(dir, {"status"}).code == 1);
  CHECK(cli(dir, {"--server", "ftp://x", "list"}).code == 1);
  // Transport error (1): nothing listens on port 1.
  const auto down = cli(dir, {"--server", "http://127.0.0.1:1", "list"});
  CHECK(down.code == 1);
  CHECK(down.err.find("cannot reach") != std::string::npos);
  CHECK(down.err.find("127.0.0.1:1: Connection refused") != std::string::npos);
  CHECK(down.err.find(".hpp") == std::string::npos);  // no library source location

  // A spec the server refuses: 1, with the field it names.
  json bad = job(sim);
  bad["sweep"] = {{"steps", 0}};
  const auto refused = run({"submit", write(dir, "bad.json", bad)});
  CHECK(refused.code == 1);
  CHECK(refused.err.find("/sweep/steps") != std::string::npos);
  CHECK(run({"submit", dir.path("missing.json").string()}).code == 1);

  // check: pass (0) below capacity, fail (3) far above it, inconclusive (4) on too few samples.
  const auto pass = run({"check", write(dir, "pass.json", check(sim, 15, 8))});
  INFO(pass.out << pass.err);
  CHECK(pass.code == 0);
  CHECK(pass.out.find("PASS") == 0);
  const auto fail = run({"check", write(dir, "fail.json", check(sim, 70, 4))});
  INFO(fail.out << fail.err);
  CHECK(fail.code == 3);
  CHECK(fail.out.find("FAIL") == 0);
  const auto unsure = run({"check", write(dir, "unsure.json", check(sim, 2, 2))});
  INFO(unsure.out << unsure.err);
  CHECK(unsure.code == 4);
  CHECK(unsure.out.find("INCONCLUSIVE") == 0);

  // list, status, steps, verdict (--json too) on the finished checks.
  const auto listed = run({"--json", "list", "--status", "succeeded"});
  REQUIRE(listed.code == 0);
  const json l = json::parse(listed.out);
  REQUIRE(l["sweeps"].size() == 3);
  const std::string fail_id = l["sweeps"][1]["id"];
  CHECK(run({"list"}).out.find(fail_id) != std::string::npos);
  const auto st = run({"status", fail_id});
  CHECK(st.code == 0);
  CHECK(st.out.find("succeeded") != std::string::npos);
  const auto steps = run({"steps", fail_id});
  CHECK(steps.code == 0);
  CHECK(steps.out.find("TTFT p95") != std::string::npos);
  CHECK(steps.out.find("check") != std::string::npos);
  CHECK(run({"verdict", fail_id}).code == 3);
  const auto vj = run({"--json", "verdict", fail_id});
  CHECK(vj.code == 3);
  CHECK(json::parse(vj.out)["verdict"] == "fail");

  // A small sweep: verdict 0, or 3 under --require-rate above its answer.
  json small = job(sim);
  small["sweep"] = {
      {"steps", 2},       {"step_duration_s", 5}, {"warmup_s", 1}, {"baseline_requests", 3}, {"probe_requests", 128},
      {"tolerance", 0.5}, {"max_steps", 3}};
  const auto sw = run({"submit", write(dir, "small.json", small), "--wait"});
  INFO(sw.out << sw.err);
  CHECK(sw.code == 0);
  CHECK(sw.out.find("within SLO") != std::string::npos);
  const std::string sweep_id = json::parse(run({"--json", "list", "--limit", "1"}).out)["sweeps"][0]["id"];
  CHECK(run({"verdict", sweep_id, "--require-rate", "1"}).code == 0);
  CHECK(run({"verdict", sweep_id, "--require-rate", "100000"}).code == 3);
  // autoscale: the thresholds of the sweep, as JSON, KEDA or HPA; a check has none (1).
  const auto aj =
      run({"--json", "autoscale", sweep_id, "--format", "json", "--peak-rps", "100", "--utilization", "0.5"});
  INFO(aj.out << aj.err);
  REQUIRE(aj.code == 0);
  const json plan = json::parse(aj.out);
  const json sweep_view = d.get_json("/v1/sweeps/" + sweep_id);
  const double capacity = sweep_view["result"]["max_slo_rate_rps"];
  CHECK(plan["capacity_rps"].get<double>() == capacity);
  CHECK(plan["max_replicas"].get<int>() == static_cast<int>(std::ceil(100 / (0.5 * capacity))));
  CHECK(plan["target_inflight_per_replica"].get<int>() ==
        std::max(1, static_cast<int>(std::floor(
                        0.5 * sweep_view["result"]["concurrency_at_max_slo"]["littles_law"].get<double>()))));
  const auto keda = run({"autoscale", sweep_id, "--namespace", "llm"});
  CHECK(keda.code == 0);
  CHECK(keda.out.find("kind: ScaledObject") != std::string::npos);
  CHECK(keda.out.find("namespace=\\\"llm\\\"") != std::string::npos);
  CHECK(run({"autoscale", sweep_id, "--format", "hpa"}).out.find("HorizontalPodAutoscaler") != std::string::npos);
  CHECK(run({"autoscale", fail_id}).code == 1);
  CHECK(run({"autoscale", sweep_id, "--format", "yaml"}).code == 1);
  // An unattainable SLO: no rate meets it (3).
  json never = small;
  never["slo"] = {{"ttft_ms", {{"mean", 0.001}}}};
  never["sweep"]["max_steps"] = 2;
  CHECK(run({"submit", write(dir, "never.json", never), "--wait"}).code == 3);

  // submit without --wait prints the id; cancel (0); watch and verdict of a cancelled job (2).
  json longer = small;
  longer["sweep"]["step_duration_s"] = 60;
  const auto queued = run({"submit", write(dir, "long.json", longer)});
  CHECK(queued.code == 0);
  const std::string long_id = queued.out.substr(0, queued.out.find('\n'));
  CHECK(long_id.rfind("sw-", 0) == 0);
  CHECK(run({"cancel", long_id}).code == 0);
  CHECK(run({"watch", long_id}).code == 2);
  CHECK(run({"verdict", long_id}).code == 2);
  CHECK(run({"cancel", long_id}).code == 1);  // already ended: the server says 409
  CHECK(run({"status", "sw-0000000000000000"}).code == 1);
}

TEST_CASE("cli: datasets, lengths, and a job whose exports follow report.percentiles and show its labels") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string server = "http://127.0.0.1:" + std::to_string(d.endpoint().port());
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--server", server});
    return cli(dir, args);
  };
  const std::string example = std::string(CAPSWEEP_SOURCE_DIR) + "/config/datasets/sharegpt-small.json";

  // lengths: local, nothing sent; both blocks parse as workload lengths.
  const CliRun lengths = cli(dir, {"--json", "lengths", example});
  INFO(lengths.err);
  REQUIRE(lengths.code == 0);
  const json fitted = json::parse(lengths.out);
  CHECK(fitted["prompt_tokens"]["items"] == 48);
  CHECK(fitted["prompt_tokens"]["lognormal"]["dist"] == "lognormal");
  CHECK(fitted["output_tokens"]["empirical"]["dist"] == "empirical");
  const CliRun text = cli(dir, {"lengths", example});
  CHECK(text.out.find("fitted log-normal (paste into \"workload\")") != std::string::npos);
  std::ofstream(dir.path("bad.csv")) << "prompt_tokens\n12\nmany\n";
  const CliRun bad_csv = cli(dir, {"lengths", dir.path("bad.csv").string()});
  CHECK(bad_csv.code == 1);
  CHECK(bad_csv.err.find("line 3") != std::string::npos);

  // dataset upload / list / show; the same file again is the same dataset.
  const CliRun up = run({"dataset", "upload", example, "--name", "example"});
  INFO(up.err);
  REQUIRE(up.code == 0);
  const std::string id = up.out.substr(0, up.out.find('\n'));
  CHECK(id == "ds-ae85ad79e69aec24");  // the id config/sweeps/sharegpt.json names
  CHECK(run({"dataset", "upload", example}).err.find("already stored") != std::string::npos);
  const CliRun listed = run({"dataset", "list"});
  CHECK(listed.out.find(id) != std::string::npos);
  CHECK(listed.out.find("sharegpt") != std::string::npos);
  CHECK(run({"dataset", "show", id}).out.find("prompt_tokens") != std::string::npos);
  CHECK(run({"dataset", "show", "ds-ffffffffffffffff"}).code == 1);

  // A check on the example's recorded conversations whose output lengths come from the
  // dataset's histogram, with chosen percentiles and labels.
  json spec = check(sim, 8, 3);
  spec["workload"] = {{"dataset", {{"id", id}, {"order", "shuffled"}}},
                      {"seed", 4},
                      {"prompt_tokens", {{"dist", "empirical"}, {"dataset", id}}}};
  CHECK(run({"submit", write(dir, "both.json", spec)}).code == 1);  // prompts from the dataset and lengths too
  spec["workload"].erase("prompt_tokens");
  spec["workload"]["dataset"]["output_tokens"] = {{"dist", "empirical"}, {"dataset", id}, {"field", "output"}};
  spec["report"] = {{"percentiles", {50, 99.9}}};
  spec["target"]["labels"] = {{"gpu", "sim"}, {"runtime_version", "llmsim-1"}};
  spec["slo"] = {{"ttft_ms", {{"p50", 800}}}};  // decidable on the few requests of a short check
  const CliRun done = run({"submit", write(dir, "check.json", spec), "--wait"});
  INFO(done.out << done.err);
  // Pass, or inconclusive where a sanitizer build's generator is too slow to be trusted.
  REQUIRE((done.code == 0 || done.code == 4));
  CHECK(done.out.find("TTFT p99.9") != std::string::npos);  // the steps table
  const json list = d.get_json("/v1/sweeps");
  const std::string job_id = list["sweeps"][0]["id"];
  CHECK(list["sweeps"][0]["labels"]["gpu"] == "sim");
  CHECK(run({"list"}).out.find("gpu=sim runtime_version=llmsim-1") != std::string::npos);
  const json v = d.get_json("/v1/sweeps/" + job_id);
  const json& out_dist = v["spec"]["workload"]["dataset"]["output_tokens"];
  CHECK(out_dist["sha256"].get<std::string>().rfind("ae85ad79", 0) == 0);
  CHECK(out_dist["values"].size() == out_dist["weights"].size());
  CHECK(v["result"]["labels"]["runtime_version"] == "llmsim-1");
  // Every export shows p50 and p99.9.
  const json steps = d.get_json("/v1/sweeps/" + job_id + "/steps");
  CHECK(steps["steps"][0]["summary"]["p99.9_ttft_ms"].is_number());
  CHECK(steps["steps"][0]["summary"]["percentiles"] == json({50, 99.9}));
  CHECK(v["result"]["observations"]["p99.9_itl_ms"].is_number());
  const auto csv = d.get("/v1/sweeps/" + job_id + "/steps.csv");
  CHECK(csv.body.find("p99.9_ttft_ms") != std::string::npos);
  CHECK(csv.body.find("p99.9_e2el_ms") != std::string::npos);
  CHECK(csv.body.find("p90_ttft_ms") == std::string::npos);  // not chosen
  const auto report = d.get("/v1/sweeps/" + job_id + "/report");
  CHECK(report.body.find("<th>TTFT p99.9 ms</th>") != std::string::npos);
  CHECK(report.body.find("TTFT distribution (CDF)") != std::string::npos);
  CHECK(report.body.find("runtime_version=llmsim-1") != std::string::npos);

  // Once the job is done the dataset can go; a second rm finds nothing.
  CHECK(run({"dataset", "rm", id}).code == 0);
  CHECK(run({"dataset", "rm", id}).code == 1);
}

namespace {

// The words of a Markdown file's fenced block that starts with `first_line`.
std::vector<std::string> fenced_block(const std::string& relative, const std::string& first_line) {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/" + relative);
  std::vector<std::string> lines;
  std::string line;
  bool fence = false, found = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      if (found) break;
      fence = !fence;
      continue;
    }
    if (fence && !found && line.rfind(first_line, 0) == 0) {
      found = true;
      continue;
    }
    if (found) lines.push_back(line);
  }
  return lines;
}

// Subcommands named in a usage block: the first word of each entry (entries are separated by
// runs of spaces); "dataset upload" names "dataset" and its own subcommand "upload".
std::set<std::string> documented_subcommands(const std::vector<std::string>& lines, std::set<std::string>& dataset) {
  std::set<std::string> subs;
  for (const auto& l : lines) {
    std::size_t i = 0;
    while (i < l.size()) {
      while (i < l.size() && l[i] == ' ') ++i;
      const std::size_t end = l.find("   ", i);
      const std::string entry = l.substr(i, end == std::string::npos ? std::string::npos : end - i);
      i = end == std::string::npos ? l.size() : end;
      if (entry.empty() || !std::islower(static_cast<unsigned char>(entry[0]))) continue;
      std::istringstream words(entry);
      std::string word, next;
      words >> word >> next;
      subs.insert(word);
      if (word == "dataset") dataset.insert(next);
    }
  }
  return subs;
}

// The subcommands the CLI's own --help lists.
std::set<std::string> listed_subcommands(const std::string& help) {
  std::set<std::string> subs;
  std::istringstream in(help.substr(help.find("Subcommands:")));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line) && line.rfind("  ", 0) == 0) {
    std::istringstream words(line);
    std::string word;
    words >> word;
    subs.insert(word);
  }
  return subs;
}

}  // namespace

TEST_CASE("cli: the subcommands docs/cli.md and client/README.md document are the CLI's, and each answers --help") {
  TempDir dir;
  std::set<std::string> dataset_subs;
  const auto documented = documented_subcommands(fenced_block("docs/cli.md", "capsweep [--server URL]"), dataset_subs);
  const auto help = cli(dir, {"--help"});
  REQUIRE(help.code == 0);
  const auto listed = listed_subcommands(help.out);
  INFO(help.out);
  CHECK(documented.size() >= 14);
  CHECK(documented == listed);  // nothing undocumented, nothing documented that is not there
  CHECK(dataset_subs == std::set<std::string>{"upload", "list", "show", "rm"});
  const std::string client_readme = read_text(std::filesystem::path(CAPSWEEP_SOURCE_DIR) / "client" / "README.md");
  for (const auto& sub : listed) {
    INFO(sub);
    const auto h = cli(dir, {sub, "--help"});
    CHECK(h.code == 0);
    CHECK(h.out.find("Usage") != std::string::npos);
    CHECK(client_readme.find("`" + sub) != std::string::npos);
  }
  for (const auto& sub : dataset_subs) {
    INFO("dataset " << sub);
    CHECK(cli(dir, {"dataset", sub, "--help"}).code == 0);
  }
}

namespace {

// The fenced blocks of a Markdown file, each as its lines (the fence's info string first).
std::vector<std::vector<std::string>> fenced_blocks(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::vector<std::string>> blocks;
  std::string line;
  bool fence = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      fence = !fence;
      if (fence) blocks.push_back({line.substr(3)});
      continue;
    }
    if (fence) blocks.back().push_back(line);
  }
  return blocks;
}

// The `capsweep ...` command lines of a block (continuations joined, comments dropped), as
// words; usage synopses (with [optional] or a|b parts) are not commands.
std::vector<std::vector<std::string>> cli_lines(const std::vector<std::string>& block) {
  std::vector<std::vector<std::string>> out;
  std::string joined;
  for (std::size_t i = 1; i < block.size(); ++i) {
    std::string l = block[i];
    if (const auto hash = l.find(" #"); hash != std::string::npos) l.erase(hash);
    const bool continues = !l.empty() && l.back() == '\\';
    if (continues) l.pop_back();
    joined += l + " ";
    if (continues) continue;
    std::istringstream words(joined);
    joined.clear();
    std::vector<std::string> w;
    for (std::string word; words >> word;) {
      if (word.size() >= 2 && (word.front() == '"' || word.front() == '\'') && word.back() == word.front())
        word = word.substr(1, word.size() - 2);
      w.push_back(word);
    }
    if (w.empty() || w[0] != "capsweep") continue;
    if (std::any_of(w.begin(), w.end(), [](const std::string& x) {
          return x.find('[') != std::string::npos || x.find('|') != std::string::npos || x == "&" || x == ">";
        }))
      continue;
    w.erase(w.begin());
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

TEST_CASE("cli: every capsweep command line in the README and docs/ parses") {
  TempDir dir;
  std::vector<std::filesystem::path> files{std::filesystem::path(CAPSWEEP_SOURCE_DIR) / "README.md"};
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(CAPSWEEP_SOURCE_DIR) / "docs"))
    if (e.path().extension() == ".md") files.push_back(e.path());
  int lines = 0;
  for (const auto& file : files) {
    for (const auto& block : fenced_blocks(file)) {
      for (auto words : cli_lines(block)) {
        ++lines;
        std::string shown;
        for (const auto& w : words) shown += w + " ";
        INFO(file.filename().string() << ": capsweep " << shown);
        // Against a port nothing listens on: a line that parses gets as far as the network
        // or a file (an error of capsweep's own, "capsweep: ..."); one that does not parse
        // gets the argument parser's complaint.
        // From the repository's root, as the docs' paths (config/datasets/...) are written.
        words.insert(words.begin(), {"--server", "http://127.0.0.1:1"});
        const auto r = cli(dir, words, CAPSWEEP_SOURCE_DIR);
        CHECK(r.err.find("Run with --help") == std::string::npos);
        if (r.code != 0) CHECK(r.err.rfind("capsweep: ", 0) == 0);
      }
    }
  }
  CHECK(lines >= 8);
}

TEST_CASE("cli: a newcomer's first sweep, as the README writes it: submit, list, report") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string server = "http://127.0.0.1:" + std::to_string(d.endpoint().port());
  const std::string sim_url = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  // The README's spec and commands, after its heading "Your first own sweep".
  std::vector<std::vector<std::string>> blocks;
  {
    const std::string readme = read_text(std::filesystem::path(CAPSWEEP_SOURCE_DIR) / "README.md");
    const auto at = readme.find("## Your first own sweep");
    REQUIRE(at != std::string::npos);
    std::ofstream(dir.path("section.md")) << readme.substr(at, readme.find("\n## ", at + 1) - at);
    blocks = fenced_blocks(dir.path("section.md"));
  }
  REQUIRE(blocks.size() == 2);
  REQUIRE(blocks[0][0] == "json");
  std::string spec;
  for (std::size_t i = 1; i < blocks[0].size(); ++i) spec += blocks[0][i] + "\n";
  // The README's target is the demo's simulator on port 8000: this one's port instead.
  for (std::size_t p; (p = spec.find("http://127.0.0.1:8000")) != std::string::npos;)
    spec.replace(p, std::string("http://127.0.0.1:8000").size(), sim_url);
  std::ofstream(dir.path("my-sweep.json")) << spec;
  const auto commands = cli_lines(blocks[1]);
  REQUIRE(commands.size() == 3);
  std::string id;
  CliRun report;
  for (auto words : commands) {
    for (auto& w : words) {
      if (w == "my-sweep.json" || w == "report.html") w = dir.path(w).string();
      if (w.rfind("sw-", 0) == 0) w = id;
    }
    words.insert(words.begin(), {"--server", server});
    const auto r = cli(dir, words);
    INFO(r.out << r.err);
    if (words[2] == "submit") {
      CHECK(r.code == 0);  // a rate was found within the SLO
      CHECK(r.out.find("within SLO") != std::string::npos);
    } else if (words[2] == "list") {
      REQUIRE(r.code == 0);
      const auto sw = r.out.find("sw-");
      REQUIRE(sw != std::string::npos);
      id = r.out.substr(sw, r.out.find_first_of(" \t\n", sw) - sw);
    } else {
      REQUIRE(words[2] == "report");
      report = r;
    }
  }
  REQUIRE(report.code == 0);
  const std::string html = read_text(dir.path("report.html"));
  // The first screen says the verdict in one sentence before any table.
  const auto verdict = html.find("id=\"verdict\"");
  REQUIRE(verdict != std::string::npos);
  CHECK(verdict < html.find("<table"));
  CHECK(html.find("req/s</b> within the SLO", verdict) < html.find("</div>", verdict));
}

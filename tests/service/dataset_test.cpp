// Datasets through capsweepd: upload, dedupe, errors, and a job that takes its prompts from one.
#include <boost/asio/connect.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

const std::map<std::string, std::string> kJsonl{{"Content-Type", "application/x-ndjson"}};

// A JSONL file of n items: item i has i + 3 prompt words and asks for 8 + i % 5 output tokens.
std::string jsonl_items(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    std::string prompt = "item" + std::to_string(i);
    for (int w = 0; w < i + 2; ++w) prompt += " word";
    out += json{{"prompt", prompt}, {"output_tokens", 8 + i % 5}}.dump() + "\n";
  }
  return out;
}

json upload(const Daemon& d, const std::string& body, const std::string& query, int expect_status) {
  auto r = d.post("/v1/datasets" + query, body, kJsonl);
  INFO(r.body);
  REQUIRE(r.status == expect_status);
  return json::parse(r.body);
}

json error_of(const HttpResult& r) {
  INFO(r.body);
  return json::parse(r.body)["error"];
}

// The answered requests of requests.csv (chunks > 0): request index, input and output tokens.
struct Answered {
  int request, input_tokens, output_tokens;
};
std::vector<Answered> answered_requests(const std::string& csv) {
  std::vector<Answered> out;
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    REQUIRE(cells.size() >= 11);
    if (cells[10] == "0") continue;  // no chunks: not answered
    out.push_back({std::stoi(cells[1]), std::stoi(cells[8]), std::stoi(cells[9])});
  }
  return out;
}

std::string sharegpt_items(int n) {
  json all = json::array();
  for (int i = 0; i < n; ++i) {
    std::string prompt = "conversation" + std::to_string(i), answer = "answer";
    for (int w = 0; w < 2 * i + 4; ++w) prompt += " word";
    for (int w = 0; w < 5 + i % 3; ++w) answer += " token";
    all.push_back(
        {{"id", i}, {"conversations", {{{"from", "human"}, {"value", prompt}}, {{"from", "gpt"}, {"value", answer}}}}});
  }
  return all.dump();
}

}  // namespace

TEST_CASE("datasets: upload, dedupe by content, list, show - bad files get a 4xx naming line and field") {
  TempDir dir;
  std::ofstream(dir.path("small.json")) << R"({"limits": {"max_dataset_bytes": 4096, "max_body_bytes": 2048}})";
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"), {"--config", dir.path("small.json").string()});
  const std::string file = jsonl_items(20);
  const json first = upload(d, file, "?name=twenty", 201);
  CHECK(first["created"] == true);
  CHECK(first["items"] == 20);
  CHECK(first["format"] == "jsonl");
  CHECK(first["name"] == "twenty");
  CHECK(first["bytes"] == file.size());
  const std::string id = first["id"];
  CHECK(id == "ds-" + first["sha256"].get<std::string>().substr(0, 16));
  // Prompt words 3..22: p50 12.5, p95 21.05, max 22 (linear interpolation).
  CHECK(first["stats"]["prompt_tokens"]["p50"] == Approx(12.5));
  CHECK(first["stats"]["prompt_tokens"]["p95"] == Approx(21.05));
  CHECK(first["stats"]["prompt_tokens"]["max"] == 22);
  CHECK(first["stats"]["output_tokens"]["max"] == 12);
  CHECK(first["stats"]["output_tokens"]["items"] == 20);

  // The same bytes again: the stored dataset, not a second copy.
  const json again = upload(d, file, "?name=other", 200);
  CHECK(again["id"] == id);
  CHECK(again["created"] == false);
  CHECK(again["name"] == "twenty");
  const json list = d.get_json("/v1/datasets");
  REQUIRE(list["datasets"].size() == 1);
  CHECK(list["datasets"][0]["id"] == id);
  const json shown = d.get_json("/v1/datasets/" + id);
  CHECK(shown["sha256"] == first["sha256"]);
  CHECK(shown["used_by"].empty());

  // Errors: the line and field, the size limit, the media type, the format, unknown ids.
  auto bad = d.post("/v1/datasets", file + "{\"prompt\": \"x\", \"max_tokens\": \"many\"}\n", kJsonl);
  CHECK(bad.status == 400);
  CHECK(error_of(bad)["field"] == "line 21: /max_tokens");
  auto bad_messages = d.post("/v1/datasets", R"({"messages": [{"role": "user"}]})", kJsonl);
  CHECK(bad_messages.status == 400);
  CHECK(error_of(bad_messages)["field"] == "line 1: /messages/0/content");
  auto sharegpt = d.post("/v1/datasets?format=sharegpt", R"([{"conversations": [{"value": "a"}, {"value": 3}]}])");
  CHECK(sharegpt.status == 400);
  CHECK(error_of(sharegpt)["field"] == "/0/conversations/1/value");
  auto big = d.post("/v1/datasets", jsonl_items(200), kJsonl);
  CHECK(big.status == 413);
  auto deep = d.post("/v1/datasets",
                     "{\"prompt\": \"a\", \"x\": " + std::string(100, '[') + std::string(100, ']') + "}", kJsonl);
  CHECK(deep.status == 400);
  CHECK(error_of(deep)["field"].get<std::string>().rfind("line 1: /x", 0) == 0);
  auto plain = d.post("/v1/datasets", file, {{"Content-Type", "text/plain"}});
  CHECK(plain.status == 400);
  CHECK(error_of(plain)["field"] == "Content-Type");
  std::string seven;
  for (int i = 0; i < 6; ++i) seven += "{\"prompt\": \"fine\"}\n";
  auto line7 = d.post("/v1/datasets", seven + "{\"prompt\": \"cut off\n", kJsonl);
  CHECK(line7.status == 400);
  CHECK(error_of(line7)["field"] == "line 7: /");
  auto no_prompt = d.post("/v1/datasets", seven + "{\"text\": \"no prompt here\"}\n", kJsonl);
  CHECK(no_prompt.status == 400);
  CHECK(error_of(no_prompt)["field"] == "line 7: /prompt");
  // A body declared as 1 GiB is refused from its header, before a byte of it is read.
  const std::string declared =
      raw_exchange(d.endpoint(),
                   "POST /v1/datasets HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-ndjson\r\n"
                   "Content-Length: 1073741824\r\n\r\n{\"prompt\": \"a\"}\n");
  INFO(declared);
  CHECK(declared.rfind("HTTP/1.1 413", 0) == 0);
  CHECK(d.post("/v1/datasets?format=csv", file, kJsonl).status == 400);
  CHECK(d.post("/v1/datasets", "", kJsonl).status == 400);
  CHECK(d.get("/v1/datasets/ds-ffffffffffffffff").status == 404);
  CHECK(d.del("/v1/datasets/ds-ffffffffffffffff").status == 404);
  // The spec size limit still holds for jobs: only uploads get the larger one.
  CHECK(d.post("/v1/sweeps", std::string(3000, ' ')).status == 413);
  CHECK(d.post("/v1/datasets", std::string(3000, ' '), kJsonl).status == 400);  // under the upload limit: read
  // Nothing was stored by the failures; the service still serves.
  CHECK(d.get_json("/v1/datasets")["datasets"].size() == 1);
  CHECK(d.alive());
}

TEST_CASE("datasets: a check job takes its prompts from a dataset in order and records its sha256") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const int n = 7;
  const json ds = upload(d, jsonl_items(n), "?name=seven", 201);
  const std::string id = ds["id"];
  const std::string base = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  json spec = {{"kind", "check"},
               {"target", {{"base_url", base}, {"api", "completions"}, {"model", "sim-8b"}}},
               {"workload", {{"dataset", {{"id", id}, {"order", "sequential"}}}, {"seed", 3}}},
               {"check", {{"rate_rps", 10}, {"duration_s", 4}, {"warmup_s", 1}}},
               {"slo", {{"ttft_ms", {{"p95", 800}}}}}};
  // An unknown dataset, a wrong pin and prompt_tokens beside a dataset are refused, naming the field.
  json unknown = spec;
  unknown["workload"]["dataset"]["id"] = "ds-ffffffffffffffff";
  auto r = d.post("/v1/sweeps", unknown.dump());
  CHECK(r.status == 400);
  CHECK(error_of(r)["field"] == "/workload/dataset/id");
  json pinned = spec;
  pinned["workload"]["dataset"]["sha256"] = id.substr(3) + std::string(48, '0');
  r = d.post("/v1/sweeps", pinned.dump());
  CHECK(r.status == 400);
  CHECK(error_of(r)["field"] == "/workload/dataset/sha256");
  json both = spec;
  both["workload"]["prompt_tokens"] = {{"dist", "fixed"}, {"value", 10}};
  r = d.post("/v1/sweeps", both.dump());
  CHECK(r.status == 400);
  CHECK(error_of(r)["field"] == "/workload/prompt_tokens");

  // Lengths from a dataset's histogram: errors name the field.
  json from_lengths = spec;
  from_lengths["workload"] = {{"prompt_tokens", {{"dist", "empirical"}, {"dataset", "ds-ffffffffffffffff"}}},
                              {"output_tokens", {{"dist", "fixed"}, {"value", 8}}}};
  r = d.post("/v1/sweeps", from_lengths.dump());
  CHECK(r.status == 400);
  CHECK(error_of(r)["field"] == "/workload/prompt_tokens/dataset");
  from_lengths["workload"]["prompt_tokens"] = {{"dist", "empirical"}, {"dataset", id}, {"field", "answer"}};
  r = d.post("/v1/sweeps", from_lengths.dump());
  CHECK(r.status == 400);
  CHECK(error_of(r)["field"] == "/workload/prompt_tokens/field");
  from_lengths["workload"]["prompt_tokens"] = {{"dist", "empirical"}, {"dataset", "not-an-id"}};
  r = d.post("/v1/sweeps", from_lengths.dump());
  CHECK(r.status == 400);
  CHECK(error_of(r)["field"] == "/workload/prompt_tokens/dataset");
  // Resolved: the histogram of the items' prompt words (3..9, once each) in the stored spec.
  from_lengths["workload"]["prompt_tokens"] = {{"dist", "empirical"}, {"dataset", id}};
  from_lengths["check"] = {{"rate_rps", 10}, {"duration_s", 1}, {"warmup_s", 0}};
  r = d.post("/v1/sweeps", from_lengths.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const json resolved = json::parse(r.body)["spec"]["workload"]["prompt_tokens"];
  CHECK(resolved["values"] == json({3, 4, 5, 6, 7, 8, 9}));
  CHECK(resolved["weights"] == json({1, 1, 1, 1, 1, 1, 1}));
  CHECK(resolved["sha256"] == ds["sha256"]);
  CHECK(resolved["field"] == "prompt");
  d.wait_for(
      json::parse(r.body)["id"], [](const json& x) { return x["status"] != "queued" && x["status"] != "running"; },
      60s);

  r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string job = json::parse(r.body)["id"];
  // While the job is queued or running, the dataset cannot be deleted.
  auto busy = d.del("/v1/datasets/" + id);
  CHECK(busy.status == 409);
  CHECK(error_of(busy)["message"].get<std::string>().find(job) != std::string::npos);
  const json v = d.wait_for(
      job, [](const json& x) { return x["status"] != "queued" && x["status"] != "running"; }, 60s);
  INFO(v.dump(1));
  REQUIRE(v["status"] == "succeeded");
  CHECK(v["spec"]["workload"]["dataset"]["sha256"] == ds["sha256"]);
  CHECK(v["result"]["workload"]["dataset"]["id"] == id);
  CHECK(v["result"]["workload"]["dataset"]["sha256"] == ds["sha256"]);
  // The check's record names the load whole: lengths, the longest output asked, seed, dataset.
  const json& cond = v["result"]["conditions"];
  CHECK(cond["dataset"]["id"] == id);
  CHECK(cond["dataset"]["sha256"] == ds["sha256"]);
  CHECK(cond["max_output_tokens"] == 12);
  CHECK(cond["seed"] == 3);
  CHECK(cond["burstiness"] == 1);
  CHECK(cond["prompt_tokens"]["from"] == "dataset");
  const json steps = d.get_json("/v1/sweeps/" + job + "/steps");
  REQUIRE(steps["steps"].size() == 1);
  CHECK(steps["steps"][0]["summary"]["dataset"]["sha256"] == ds["sha256"]);

  // Request i used item i mod n: the simulator counted its prompt words and produced its
  // output_tokens (ignore_eos).
  auto csv = d.get("/v1/sweeps/" + job + "/requests.csv");
  REQUIRE(csv.status == 200);
  const auto rows = answered_requests(csv.body);
  for (const auto& r : rows) {
    const int i = r.request % n;
    CHECK(r.input_tokens == i + 3);
    CHECK(r.output_tokens == 8 + i % 5);
  }
  CHECK(rows.size() > 20);
  CHECK(d.del("/v1/datasets/" + id).status == 204);
  CHECK(d.get("/v1/datasets/" + id).status == 404);
}

TEST_CASE("datasets: a chat check on a ShareGPT upload sends each conversation's first turn, its answer's length") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const int n = 9;
  const json ds = upload(d, sharegpt_items(n), "?name=nine&format=sharegpt", 201);
  CHECK(ds["format"] == "sharegpt");
  CHECK(ds["items"] == n);
  const std::string id = ds["id"];
  const std::string base = "http://127.0.0.1:" + std::to_string(sim.endpoint().port());
  json spec = {{"kind", "check"},
               {"target", {{"base_url", base}, {"api", "chat"}, {"model", "sim-8b"}}},
               {"workload", {{"dataset", {{"id", id}, {"order", "shuffled"}}}, {"seed", 5}}},
               {"check", {{"rate_rps", 8}, {"duration_s", 4}, {"warmup_s", 0}}},
               {"slo", {{"ttft_ms", {{"p95", 800}}}}}};
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  const std::string job = json::parse(r.body)["id"];
  const json v = d.wait_for(
      job, [](const json& x) { return x["status"] != "queued" && x["status"] != "running"; }, 60s);
  INFO(v.dump(1));
  REQUIRE(v["status"] == "succeeded");
  CHECK(v["result"]["workload"]["dataset"]["sha256"] == ds["sha256"]);
  // Every answered request's prompt length (as llmsim counted it) and output length are those
  // of one conversation; the shuffled order visits several of them.
  std::set<std::pair<int, int>> allowed;
  for (int i = 0; i < n; ++i) allowed.insert({2 * i + 5, 6 + i % 3});
  auto csv = d.get("/v1/sweeps/" + job + "/requests.csv");
  REQUIRE(csv.status == 200);
  std::set<std::pair<int, int>> seen;
  const auto rows = answered_requests(csv.body);
  for (const auto& r : rows) {
    const std::pair<int, int> lengths{r.input_tokens, r.output_tokens};
    CHECK(allowed.count(lengths) == 1);
    seen.insert(lengths);
  }
  CHECK(rows.size() >= 20);
  CHECK(seen.size() >= 5);
}

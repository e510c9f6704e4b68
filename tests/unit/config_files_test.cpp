// The example files under config/ parse with the project's own parsers.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "api/api.hpp"
#include "api/config.hpp"
#include "api/schema.hpp"
#include "core/lengths.hpp"
#include "core/slo.hpp"
#include "llm/dataset.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"
#include "llmsim/config.hpp"
#include "sweep/quality_pass.hpp"
#include "sweep/spec.hpp"

using json = nlohmann::json;

namespace {
json read(const std::string& relative) {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/" + relative);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}
}  // namespace

TEST_CASE("config files: the demo sweep's target, workload and SLO parse") {
  const json spec = read("config/sweeps/demo.json");
  CHECK(capsweep::llm::parse_target(spec.at("target")).has_value());
  CHECK(capsweep::llm::parse_workload(spec.at("workload")).has_value());
  auto slo = capsweep::parse_slo(spec.at("slo"));
  REQUIRE(slo.has_value());
  CHECK(slo->latency.size() == 2);
}

TEST_CASE("config files: the llmsim example is valid and equals the defaults") {
  auto cfg = capsweep::llmsim::apply_json({}, read("config/llmsim.json"));
  REQUIRE(cfg.has_value());
  CHECK(capsweep::llmsim::validate(*cfg).has_value());
  const capsweep::llmsim::SimConfig defaults;
  CHECK(cfg->engine.max_num_seqs == defaults.engine.max_num_seqs);
  CHECK(cfg->engine.decode_base_ms == defaults.engine.decode_base_ms);
  CHECK(cfg->engine.decode_per_seq_ms == defaults.engine.decode_per_seq_ms);
  CHECK(cfg->engine.prefill_ms_per_token == defaults.engine.prefill_ms_per_token);
  CHECK(cfg->engine.kv_cache_tokens == defaults.engine.kv_cache_tokens);
}

namespace {

// A job spec as the service takes it: the schema, vLLM's burstiness rule, the defaults, the
// parser. The error's field and message, or "" when it is accepted.
std::string spec_error(json spec) {
  static const capsweep::api::SchemaValidator validator(capsweep::api::embedded_schema("sweep-spec.schema.json"));
  if (auto ok = validator.validate(spec); !ok) return ok.error().field + ": " + ok.error().message;
  capsweep::sweep::complete_arrival(spec);
  validator.apply_defaults(spec);
  if (!spec.contains("sweep") && spec.value("kind", "sweep") == "sweep") spec["sweep"] = json::object();
  auto parsed = capsweep::sweep::parse_job_spec(spec);
  return parsed ? std::string() : parsed.error().field + ": " + parsed.error().message;
}

// The fenced ```json blocks of a Markdown file, in order.
std::vector<std::string> json_blocks(const std::string& relative) {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/" + relative);
  REQUIRE(in);
  std::vector<std::string> blocks;
  std::string line, block;
  bool inside = false;
  while (std::getline(in, line)) {
    if (!inside && line.rfind("```json", 0) == 0) {
      inside = true;
      block.clear();
    } else if (inside && line.rfind("```", 0) == 0) {
      inside = false;
      blocks.push_back(block);
    } else if (inside) {
      block += line + "\n";
    }
  }
  CHECK_FALSE(inside);  // an unclosed fence
  return blocks;
}

}  // namespace

TEST_CASE("config files: every example job spec under config/sweeps passes the schema and the spec parser") {
  std::set<std::string> seen;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CAPSWEEP_SOURCE_DIR) + "/config/sweeps")) {
    if (entry.path().extension() != ".json") continue;
    const std::string file = "config/sweeps/" + entry.path().filename().string();
    INFO(file);
    CHECK(spec_error(read(file)).empty());
    seen.insert(entry.path().stem().string());
  }
  // The README lists each of them.
  std::ifstream readme(std::string(CAPSWEEP_SOURCE_DIR) + "/README.md");
  std::stringstream text;
  text << readme.rdbuf();
  for (const auto& name : seen) {
    INFO(name);
    CHECK(text.str().find("`" + name + "`") != std::string::npos);
  }
  CHECK(seen.size() >= 7);
}

TEST_CASE("config files: every JSON example in the README and docs/ is accepted by the parser it documents") {
  // A block with "slo" is a job spec; one of SLO keys an SLO; one with "base_url" a target.
  // Any other block fails here, so a new example cannot go unchecked.
  std::vector<std::string> files{"README.md"};
  for (const auto& entry : std::filesystem::directory_iterator(std::string(CAPSWEEP_SOURCE_DIR) + "/docs")) {
    if (entry.path().extension() == ".md") files.push_back("docs/" + entry.path().filename().string());
  }
  int specs = 0, slos = 0, targets = 0;
  for (const auto& file : files) {
    const auto blocks = json_blocks(file);
    for (std::size_t i = 0; i < blocks.size(); ++i) {
      INFO(file << " json block " << i + 1 << ":\n" << blocks[i]);
      json j;
      REQUIRE_NOTHROW(j = json::parse(blocks[i]));
      REQUIRE(j.is_object());
      if (j.contains("slo")) {
        CHECK(spec_error(j).empty());
        ++specs;
      } else if (j.contains("ttft_ms") || j.contains("max_error_rate")) {
        auto slo = capsweep::parse_slo(j);
        CHECK(slo.has_value());
        ++slos;
      } else if (j.contains("base_url")) {
        auto t = capsweep::llm::parse_target(j);
        CHECK(t.has_value());
        ++targets;
      } else {
        FAIL("a JSON example that is no job spec, SLO or target: teach this test what it documents");
      }
    }
  }
  CHECK(specs >= 1);
  CHECK(slos >= 1);
  CHECK(targets >= 1);
}

TEST_CASE("config files: the example scenario's profile, with the capacity its sweep gives it") {
  static const capsweep::api::SchemaValidator validator(capsweep::api::embedded_schema("sweep-spec.schema.json"));
  json spec = read("config/sweeps/scenario.json");
  spec["scenario"].erase("from_sweep");
  spec["scenario"]["capacity_rps"] = 10;  // as the service writes it at submit
  validator.apply_defaults(spec);
  const auto parsed = capsweep::sweep::parse_job_spec(spec);
  REQUIRE(parsed.has_value());
  const auto profile = capsweep::sweep::scenario_profile(*parsed->scenario);
  REQUIRE(profile.has_value());
  CHECK(profile->duration() == std::chrono::seconds(160));
  CHECK(profile->rate_at(std::chrono::seconds(60)) == Approx(15));  // the 150% spike
  CHECK(parsed->scenario->checks.scale_down_max_cut_streams == 0u);
}

TEST_CASE("config files: the example ShareGPT dataset parses, and the spec names it by its content address") {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/config/datasets/sharegpt-small.json", std::ios::binary);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = capsweep::llm::parse_dataset(capsweep::llm::DatasetFormat::sharegpt, text.str());
  INFO((parsed ? std::string() : parsed.error().field + ": " + parsed.error().message));
  REQUIRE(parsed.has_value());
  CHECK(parsed->stats.items == 48);
  CHECK(parsed->stats.prompt_tokens.p95 > 2 * parsed->stats.prompt_tokens.p50);  // a long tail, as real chats have
  const json spec = read("config/sweeps/sharegpt.json");
  CHECK(spec["workload"]["dataset"]["id"] == capsweep::llm::dataset_id(capsweep::llm::sha256_hex(text.str())));
}

TEST_CASE("config files: the quality rehearsal dataset serves every check, and the regression example names it") {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/config/datasets/quality-rehearsal.jsonl", std::ios::binary);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = capsweep::llm::parse_dataset(capsweep::llm::DatasetFormat::jsonl, text.str());
  INFO((parsed ? std::string() : parsed.error().field + ": " + parsed.error().message));
  REQUIRE(parsed.has_value());
  CHECK(parsed->stats.items == 200);
  const json spec = read("config/sweeps/regression.json");
  CHECK(spec["quality"]["dataset"] == capsweep::llm::dataset_id(capsweep::llm::sha256_hex(text.str())));
  capsweep::sweep::QualitySettings q;
  for (const auto& c : spec["quality"]["checks"])
    q.checks.push_back(*capsweep::sweep::parse_quality_check(c.get<std::string>()));
  CHECK_FALSE(capsweep::sweep::quality_items_problem(q, parsed->entries, true).has_value());
}

TEST_CASE("config files: the capsweepd example is valid and equals the defaults") {
  const auto cfg = capsweep::api::parse_config(read("config/capsweepd.json")).value();
  const auto defaults = capsweep::api::default_config();
  CHECK(cfg.listen == defaults.listen);
  CHECK(cfg.db == defaults.db);
  CHECK(cfg.allow.entries() == defaults.allow.entries());
  CHECK(cfg.max_concurrent_sweeps == defaults.max_concurrent_sweeps);
  CHECK(cfg.limits.max_rate_rps == defaults.limits.max_rate_rps);
  CHECK(cfg.limits.max_body_bytes == defaults.limits.max_body_bytes);
  CHECK(cfg.limits.max_queued_sweeps == defaults.limits.max_queued_sweeps);
  CHECK(cfg.limits.max_json_depth == defaults.limits.max_json_depth);
  CHECK(cfg.limits.max_requests_per_step == defaults.limits.max_requests_per_step);
  CHECK(cfg.limits.max_prompt_tokens == defaults.limits.max_prompt_tokens);
  CHECK(cfg.limits.max_output_tokens == defaults.limits.max_output_tokens);
  CHECK(cfg.limits.max_api_connections == defaults.limits.max_api_connections);
  CHECK(cfg.limits.max_api_connections_per_client == defaults.limits.max_api_connections_per_client);
  CHECK(cfg.limits.header_timeout_s == defaults.limits.header_timeout_s);
  CHECK(cfg.limits.max_response_bytes == defaults.limits.max_response_bytes);
  CHECK(cfg.limits.max_sse_event_bytes == defaults.limits.max_sse_event_bytes);
  CHECK(cfg.allowed_hosts.entries() == defaults.allowed_hosts.entries());
  CHECK(cfg.tls_ca_dir == defaults.tls_ca_dir);
  CHECK(cfg.insecure_no_auth == defaults.insecure_no_auth);
  CHECK(cfg.retention.max_age_days == defaults.retention.max_age_days);
  CHECK(cfg.retention.max_sweeps == defaults.retention.max_sweeps);
}

TEST_CASE("config files: openapi.yaml documents every route of the API, and no other") {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/schema/openapi.yaml");
  REQUIRE(in);
  // Paths are the two-space-indented keys under "paths:", methods the four-space ones.
  std::set<std::pair<std::string, std::string>> documented;
  std::string line, path;
  bool in_paths = false;
  while (std::getline(in, line)) {
    if (line == "paths:") {
      in_paths = true;
      continue;
    }
    if (!in_paths) continue;
    if (line.size() > 3 && line.rfind("  /", 0) == 0 && line.back() == ':') path = line.substr(2, line.size() - 3);
    for (const char* m : {"get", "post", "delete", "put", "patch"}) {
      if (line == std::string("    ") + m + ":") {
        std::string upper(m);
        for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        documented.emplace(upper, path);
      }
    }
  }
  capsweep::api::Api api(capsweep::api::ApiContext{});
  std::set<std::pair<std::string, std::string>> served;
  for (const auto& r : api.routes()) served.insert(r);
  CHECK(documented == served);
  CHECK(served.size() == 28);
}

namespace {

// The schema's objects that are free-form maps by design: HTTP headers, the request body's
// extra fields (sent as given), a target's labels.
bool free_form(const std::string& pointer) {
  for (const char* tail : {"/headers", "/extra_body", "/labels"}) {
    const std::string t(tail);
    if (pointer.size() >= t.size() && pointer.compare(pointer.size() - t.size(), t.size(), t) == 0) return true;
  }
  return false;
}

void schema_objects(const json& node, const std::string& path, std::vector<std::string>& open) {
  if (node.is_object()) {
    if ((node.value("type", json()) == "object" || node.contains("properties")) && !free_form(path) &&
        node.value("additionalProperties", json(true)) != json(false)) {
      open.push_back(path);
    }
    for (const auto& [k, v] : node.items()) schema_objects(v, path + "/" + k, open);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) schema_objects(node[i], path + "/" + std::to_string(i), open);
  }
}

// Every object of a spec instance, by JSON pointer (free-form maps left out).
void instance_objects(const json& node, const std::string& pointer, std::vector<std::string>& out) {
  if (node.is_object()) {
    if (free_form(pointer)) return;
    out.push_back(pointer);
    for (const auto& [k, v] : node.items()) instance_objects(v, pointer + "/" + k, out);
  } else if (node.is_array()) {
    for (std::size_t i = 0; i < node.size(); ++i) instance_objects(node[i], pointer + "/" + std::to_string(i), out);
  }
}

}  // namespace

TEST_CASE("every object of a job spec refuses an unknown key, naming it: the schema and the parser agree") {
  // The schema: every object but the free-form maps refuses keys it does not list.
  std::vector<std::string> open;
  schema_objects(capsweep::api::embedded_schema("sweep-spec.schema.json"), "", open);
  INFO(json(open).dump());
  CHECK(open.empty());
  // The example specs, and specs with every length distribution and every scenario check.
  std::vector<json> specs;
  for (const char* name : {"chat", "demo", "rag", "regression", "scenario", "sharegpt", "standard"}) {
    specs.push_back(read(std::string("config/sweeps/") + name + ".json"));
  }
  const json lengths[] = {{{"dist", "fixed"}, {"value", 100}},
                          {{"dist", "uniform"}, {"min", 10}, {"max", 100}},
                          {{"dist", "normal"}, {"mean", 100}, {"stdev", 10}, {"min", 10}, {"max", 200}},
                          {{"dist", "lognormal"}, {"median", 100}, {"p95", 300}, {"max", 1000}},
                          {{"dist", "empirical"}, {"values", {10, 100}}, {"weights", {1, 3}}}};
  for (const json& l : lengths) {
    json s = specs[1];
    s["workload"]["prompt_tokens"] = l;
    s["workload"]["output_tokens"] = l;
    REQUIRE(spec_error(s).empty());
    specs.push_back(s);
  }
  json scenario = read("config/sweeps/scenario.json");
  scenario["scenario"]["checks"] = {{"cold_start", {{"expected_s", 8}, {"tolerance_pct", 10}}},
                                    {"readiness", {{"window_s", 5}, {"max_ttft_ms", 900}}},
                                    {"flapping", {{"max_direction_changes", 2}}}};
  specs.push_back(scenario);
  scenario["scenario"]["replicas"] = {{"prometheus", {{"url", "http://127.0.0.1:9090"}, {"ready", "up"}}}};
  specs.push_back(scenario);
  std::size_t tried = 0;
  for (const json& spec : specs) {
    INFO(spec.dump());
    REQUIRE(spec_error(spec).empty());
    std::vector<std::string> objects;
    instance_objects(spec, "", objects);
    for (const auto& pointer : objects) {
      json typo = spec;
      typo[json::json_pointer(pointer)]["typo_key"] = 1;
      const std::string e = spec_error(typo);
      INFO(pointer << " -> " << e);
      CHECK(e.rfind(pointer + "/typo_key: ", 0) == 0);
      ++tried;
    }
  }
  CHECK(tried > 150);
}

TEST_CASE("a length distribution or a scenario check refuses a key it does not read, in the parser itself") {
  using capsweep::parse_length_dist;
  // Another distribution's key is not silently ignored: the lengths sent would not be the
  // spec's (the schema lists the keys of every distribution, so the parser tells them apart).
  auto fixed_max = parse_length_dist(json{{"dist", "fixed"}, {"value", 100}, {"max", 200}}, "/workload/prompt_tokens");
  REQUIRE_FALSE(fixed_max.has_value());
  CHECK(fixed_max.error().field == "/workload/prompt_tokens/max");
  CHECK(fixed_max.error().message == "unknown field of a fixed distribution (expected dist, value)");
  auto logn = parse_length_dist(json{{"dist", "lognormal"}, {"median", 100}, {"p59", 300}}, "/w");
  REQUIRE_FALSE(logn.has_value());
  CHECK(logn.error().field == "/w/p59");
  CHECK(parse_length_dist(json{{"dist", "uniform"}, {"min", 1}, {"max", 5}}, "/w").has_value());
  const std::string e = spec_error(json::parse(R"({"target": {"base_url": "http://127.0.0.1:9", "model": "m"},
      "slo": {"ttft_ms": {"p95": 800}},
      "workload": {"prompt_tokens": {"dist": "normal", "mean": 100, "stdev": 10, "median": 90}}})"));
  INFO(e);
  CHECK(e.rfind("/workload/prompt_tokens/median: unknown field of a normal distribution", 0) == 0);
  json s = read("config/sweeps/scenario.json");
  s["scenario"]["checks"] = {{"metric_choice", {{"ranked", true}}}};
  CHECK(spec_error(s).rfind("/scenario/checks/metric_choice/ranked: ", 0) == 0);
}

namespace {
// The capsweepd.json held by a Kubernetes ConfigMap file (its block scalar, unindented).
json configmap_config(const std::string& relative) {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/" + relative);
  REQUIRE(in);
  std::string line, text;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.find("capsweepd.json: |") != std::string::npos) {
      inside = true;
    } else if (inside) {
      if (line.rfind("    ", 0) != 0 && !line.empty()) break;
      text += line.size() > 4 ? line.substr(4) : "";
      text += "\n";
    }
  }
  return json::parse(text);
}
}  // namespace

TEST_CASE("config files: the Kubernetes ConfigMaps hold settings capsweepd takes") {
  auto base = capsweep::api::parse_config(configmap_config("deploy/k8s/base/configmap.yaml"));
  INFO((base ? std::string() : base.error().field + ": " + base.error().message));
  REQUIRE(base.has_value());
  CHECK_FALSE(base->agent_jobs.apply);
  auto agents = capsweep::api::parse_config(configmap_config("deploy/k8s/agents/configmap.yaml"));
  INFO((agents ? std::string() : agents.error().field + ": " + agents.error().message));
  REQUIRE(agents.has_value());
  CHECK(agents->agent_jobs.apply);
  CHECK(agents->agent_jobs.secret == "capsweep-agent-token");
  // The component changes only the agents' settings.
  json without = configmap_config("deploy/k8s/agents/configmap.yaml");
  without.erase("agents");
  CHECK(without == configmap_config("deploy/k8s/base/configmap.yaml"));
}

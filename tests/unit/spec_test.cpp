// The job spec: schema validation (valijson) with the failing field named, defaults filled,
// and the cross-field checks of parse_job_spec.
#include "sweep/spec.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "api/schema.hpp"
#include "core/schedule.hpp"
#include "llm/workload.hpp"
#include "sweep/kinds.hpp"
#include "sweep/manager_parts.hpp"
#include "sweep/orchestrator.hpp"
#include "sweep/traffic.hpp"

using namespace capsweep;
using json = nlohmann::json;

namespace {

json demo() {
  std::ifstream in(std::string(CAPSWEEP_SOURCE_DIR) + "/config/sweeps/demo.json");
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

const api::SchemaValidator& validator() {
  static const api::SchemaValidator v(api::embedded_schema("sweep-spec.schema.json"));
  return v;
}

// The error field the schema, then the spec parser, name for a spec (empty when valid).
std::string first_error(json spec) {
  if (auto ok = validator().validate(spec); !ok) return ok.error().field;
  validator().apply_defaults(spec);
  auto parsed = sweep::parse_job_spec(spec);
  return parsed ? std::string() : parsed.error().field;
}

json with(json spec, const std::string& pointer, json value) {
  spec[json::json_pointer(pointer)] = std::move(value);
  return spec;
}

json without(json spec, const std::string& parent, const std::string& key) {
  spec[json::json_pointer(parent)].erase(key);
  return spec;
}

}  // namespace

TEST_CASE("spec: the demo spec is valid and parses to its values") {
  json spec = demo();
  REQUIRE(validator().validate(spec).has_value());
  validator().apply_defaults(spec);
  auto js = sweep::parse_job_spec(spec).value();
  CHECK(js.kind == sweep::JobKind::sweep);
  CHECK(js.target.model == "sim-8b");
  CHECK(js.metrics_url == "http://127.0.0.1:8000/metrics");
  CHECK(js.arrival.process == ArrivalProcess::poisson);
  CHECK(js.slo.latency.size() == 2);
  CHECK(js.sweep.steps == spec["sweep"]["steps"].get<int>());
  CHECK(js.sweep.step_duration == std::chrono::seconds(spec["sweep"]["step_duration_s"].get<int>()));
}

TEST_CASE("spec: defaults filled from the schema equal the parser's own defaults") {
  json minimal = {{"target", {{"base_url", "http://127.0.0.1:8000"}, {"model", "m"}}},
                  {"slo", {{"ttft_ms", {{"p95", 800}}}}}};
  REQUIRE(validator().validate(minimal).has_value());
  json filled = minimal;
  validator().apply_defaults(filled);
  filled["sweep"] = json::object();
  validator().apply_defaults(filled);
  CHECK(filled["kind"] == "sweep");
  CHECK(filled["arrival"]["process"] == "poisson");
  CHECK(filled["sweep"]["steps"] == 6);
  CHECK(filled["workload"]["output_tokens"]["value"] == 64);
  const auto a = sweep::parse_job_spec(minimal).value();
  const auto b = sweep::parse_job_spec(filled).value();
  CHECK(a.sweep.steps == b.sweep.steps);
  CHECK(a.sweep.step_duration == b.sweep.step_duration);
  CHECK(a.sweep.warmup == b.sweep.warmup);
  CHECK(a.sweep.tolerance == b.sweep.tolerance);
  CHECK(a.sweep.max_steps == b.sweep.max_steps);
  CHECK(a.sweep.stop_after_failures == b.sweep.stop_after_failures);
  CHECK(a.sweep.baseline_requests == b.sweep.baseline_requests);
  CHECK(a.sweep.probe_requests == b.sweep.probe_requests);
  CHECK(a.sweep.probe_concurrency == b.sweep.probe_concurrency);
  CHECK(a.sweep.escalation_factor == b.sweep.escalation_factor);
  CHECK(a.sweep.drain_timeout == b.sweep.drain_timeout);
  CHECK(a.workload.prompt_tokens.nominal_mean() == b.workload.prompt_tokens.nominal_mean());
  CHECK(a.slo.confidence == b.slo.confidence);
}

TEST_CASE("spec: malformed specs name the failing field") {
  const json d = demo();
  CHECK(first_error(d).empty());
  CHECK(first_error(with(d, "/target/model", 5)) == "/target/model");
  CHECK(first_error(without(d, "/target", "model")) == "/target/model");
  CHECK(first_error(without(d, "", "target")) == "/target");
  CHECK(first_error(with(d, "/target/api", "grpc")) == "/target/api");
  CHECK(first_error(with(d, "/target/base_url", "ftp://host")) == "/target/base_url");
  CHECK(first_error(with(d, "/target/base_url", "http://")) == "/target/base_url");
  CHECK(first_error(with(d, "/bogus", 1)) == "/bogus");
  CHECK(first_error(with(d, "/sweep/steps", 0)) == "/sweep/steps");
  CHECK(first_error(with(d, "/sweep/steps", "six")) == "/sweep/steps");
  CHECK(first_error(with(d, "/sweep/warmup_s", 30)) == "/sweep/warmup_s");  // not shorter than the step
  CHECK(first_error(with(d, "/sweep/tolerance", 1.5)) == "/sweep/tolerance");
  CHECK(first_error(with(d, "/slo/ttft_ms", json{{"p95", -1}})) == "/slo/ttft_ms/p95");
  CHECK(first_error(with(d, "/slo/ttft_ms", json{{"q95", 1}})) == "/slo/ttft_ms/q95");
  CHECK(first_error(with(d, "/slo/ttft_ms", json{{"p100", 5}})) == "/slo/ttft_ms/p100");  // (0, 100) exclusive
  CHECK(first_error(with(d, "/slo/max_error_rate", 2)) == "/slo/max_error_rate");
  CHECK(first_error(with(d, "/workload/prompt_tokens", json{{"dist", "uniform"}, {"min", 50}, {"max", 10}})) ==
        "/workload/prompt_tokens/max");
  CHECK(first_error(with(d, "/workload/output_tokens", json{{"value", 3}})) == "/workload/output_tokens/dist");
  CHECK(first_error(with(d, "/arrival/process", "bursty")) == "/arrival/process");
  CHECK(first_error(with(d, "/arrival/process", "all_at_once")) == "/arrival/process");  // a sweep needs rates
  CHECK(first_error(with(d, "/kind", "check")) == "/sweep");  // a check job carries "check", not "sweep"
  CHECK(first_error(with(d, "/sweep/max_step_duration_s", 1)) == "/sweep/max_step_duration_s");  // under warm-up + step
  CHECK(first_error(with(d, "/sweep/max_step_duration_s", -5)) == "/sweep/max_step_duration_s");
  CHECK(first_error(with(d, "/sweep/max_step_duration_s", 1e9)) == "/sweep/max_step_duration_s");  // over the maximum
  CHECK(first_error(with(d, "/confidence_typo", 1)) == "/confidence_typo");
  CHECK(first_error(with(d, "/slo/confidence", 0.3)) == "/slo/confidence");  // [0.5, 1)
  CHECK(first_error(with(d, "/slo/goodput", json{{"ttft_sent_ms", 500}, {"e2el_sent_ms", 4000}})).empty());
  CHECK(first_error(with(d, "/slo/goodput", json{{"ttft_sent_ms", 0}})) == "/slo/goodput/ttft_sent_ms");
  CHECK(first_error(with(d, "/sweep/search", "binary")) == "/sweep/search");
  CHECK(first_error(with(d, "/sweep/scout_s", 5)) == "/sweep/scout_s");  // the ladder has no scouts
  const json scout = with(d, "/sweep/search", "scout");
  CHECK(first_error(scout).empty());
  CHECK(first_error(with(scout, "/sweep/scout_s", 0)) == "/sweep/scout_s");
  CHECK(first_error(with(scout, "/sweep/scout_s", 1e6)) == "/sweep/scout_s");  // over the schema's maximum
  CHECK(first_error(with(with(scout, "/sweep/scout_s", 61), "/sweep/step_duration_s", 60)) == "/sweep/scout_s");
  const json long_steps = with(with(scout, "/sweep/step_duration_s", 60), "/sweep/warmup_s", 10);
  CHECK(first_error(long_steps).empty());
  CHECK(first_error(with(long_steps, "/sweep/scout_warmup_s", 20)) == "/sweep/scout_warmup_s");
  CHECK(first_error(with(with(scout, "/sweep/mode", "concurrency"), "/sweep/scout_s", 2)) == "/sweep/search");
}

TEST_CASE("spec: a scouting search's step lengths, given and by default") {
  json spec = with(demo(), "/sweep/search", "scout");
  spec["sweep"]["step_duration_s"] = 60;
  spec["sweep"]["warmup_s"] = 10;
  validator().apply_defaults(spec);
  auto js = sweep::parse_job_spec(spec).value();
  CHECK(js.sweep.search == sweep::SweepSearch::scout);
  CHECK(js.sweep.scout_duration == std::chrono::seconds(15));
  CHECK(js.sweep.scout_warmup == std::chrono::seconds(5));
  spec["sweep"]["step_duration_s"] = 8;
  spec["sweep"]["warmup_s"] = 2;
  js = sweep::parse_job_spec(spec).value();
  CHECK(js.sweep.scout_duration == std::chrono::seconds(2));  // a quarter of a short step
  CHECK(js.sweep.scout_warmup == std::chrono::seconds(1));
  spec["sweep"]["scout_s"] = 3.5;
  spec["sweep"]["scout_warmup_s"] = 0;
  js = sweep::parse_job_spec(spec).value();
  CHECK(js.sweep.scout_duration == std::chrono::milliseconds(3500));
  CHECK(js.sweep.scout_warmup == Nanos{0});
}

TEST_CASE("spec: check jobs need a rate, or a count with all_at_once") {
  json c = without(demo(), "", "sweep");
  c["kind"] = "check";
  c["check"] = {{"rate_rps", 10}, {"duration_s", 60}, {"warmup_s", 10}};
  c["basis"] = "SLA 4.2";
  CHECK(first_error(c).empty());
  json filled = c;
  validator().apply_defaults(filled);
  const auto js = sweep::parse_job_spec(filled).value();
  CHECK(js.kind == sweep::JobKind::check);
  CHECK(js.check.rate_rps == 10);
  CHECK(js.check.duration == std::chrono::seconds(60));
  CHECK(js.check.warmup == std::chrono::seconds(10));
  CHECK(js.basis == "SLA 4.2");
  CHECK(first_error(without(c, "/check", "rate_rps")) == "/check/rate_rps");
  CHECK(first_error(with(c, "/check/rate_rps", -3)) == "/check/rate_rps");
  CHECK(first_error(with(c, "/check/warmup_s", 60)) == "/check/warmup_s");
  json offline = with(c, "/arrival/process", "all_at_once");
  offline["check"].erase("rate_rps");
  CHECK(first_error(offline) == "/check/requests");
  offline["check"]["requests"] = 500;
  CHECK(first_error(offline).empty());
  validator().apply_defaults(offline);
  CHECK(std::isinf(sweep::parse_job_spec(offline).value().check.rate_rps));
  CHECK(first_error(with(offline, "/check/rate_rps", 5)) == "/check/rate_rps");
}

namespace {

// The coefficient of variation of the gaps of the schedule a check step of `spec` sends.
double sent_gap_cv(json spec) {
  sweep::complete_arrival(spec);
  REQUIRE(validator().validate(spec).has_value());
  validator().apply_defaults(spec);
  const auto js = sweep::parse_job_spec(spec).value();
  const auto order = std::get<sweep::StepOrder>(sweep::next_action(js, {}));
  const loadgen::StepSpec step = loadgen::plan_load_step(sweep::load_settings(js, order, 0, "", 0), {}).value();
  const Schedule s = make_schedule(step.arrival, {step.duration, step.requests}, step.seed).value();
  REQUIRE(s.send_times.size() > 2000);
  std::vector<double> gaps;
  for (std::size_t i = 1; i < s.send_times.size(); ++i) gaps.push_back(to_s(s.send_times[i] - s.send_times[i - 1]));
  double mean = 0, var = 0;
  for (double g : gaps) mean += g / static_cast<double>(gaps.size());
  for (double g : gaps) var += (g - mean) * (g - mean) / static_cast<double>(gaps.size() - 1);
  return std::sqrt(var) / mean;
}

}  // namespace

TEST_CASE("spec: burstiness given alone means gamma arrivals of that shape, recorded and sent so (vLLM's rule)") {
  json c = without(demo(), "", "sweep");
  c["kind"] = "check";
  c["check"] = {{"rate_rps", 50}, {"duration_s", 100}, {"warmup_s", 1}};
  c["arrival"] = {{"burstiness", 0.25}};
  json completed = c;
  sweep::complete_arrival(completed);
  CHECK(completed["arrival"]["process"] == "gamma");  // the stored spec names what is sent
  CHECK(completed["arrival"]["burstiness"] == 0.25);
  // Gamma gaps of shape b have a CV of 1/sqrt(b): 2 here, 1 for Poisson.
  CHECK(sent_gap_cv(c) == Approx(2.0).epsilon(0.08));
  c["arrival"] = {{"burstiness", 1}};
  CHECK(sent_gap_cv(c) == Approx(1.0).epsilon(0.06));
  json poisson = c;
  sweep::complete_arrival(poisson);
  CHECK_FALSE(poisson["arrival"].contains("process"));  // burstiness 1 changes nothing
  json none = without(c, "", "arrival");
  sweep::complete_arrival(none);
  CHECK_FALSE(none.contains("arrival"));
}

TEST_CASE("spec: a burstiness that a non-gamma process would not send is refused, naming it") {
  json c = without(demo(), "", "sweep");
  c["kind"] = "check";
  c["check"] = {{"rate_rps", 10}, {"duration_s", 60}};
  for (const char* process : {"poisson", "constant"}) {
    INFO(process);
    c["arrival"] = {{"process", process}, {"burstiness", 0.5}};
    sweep::complete_arrival(c);
    CHECK(c["arrival"]["process"] == process);  // an explicit process is never rewritten
    CHECK(first_error(c) == "/arrival/burstiness");
    c["arrival"]["burstiness"] = 1;
    CHECK(first_error(c).empty());
  }
  c["arrival"] = {{"process", "gamma"}, {"burstiness", 0.5}};
  CHECK(first_error(c).empty());
  // A sweep takes the same rule.
  CHECK(first_error(with(demo(), "/arrival", json{{"process", "poisson"}, {"burstiness", 3}})) ==
        "/arrival/burstiness");
}

TEST_CASE("spec: a closed-loop check takes concurrency instead of a rate") {
  json c = without(demo(), "", "sweep");
  c["kind"] = "check";
  c["check"] = {{"concurrency", 8}, {"duration_s", 30}, {"warmup_s", 5}};
  CHECK(first_error(c).empty());
  json filled = c;
  validator().apply_defaults(filled);
  const auto js = sweep::parse_job_spec(filled).value();
  CHECK(js.check.concurrency == 8);
  CHECK(js.check.rate_rps == 0);
  CHECK(js.check.duration == std::chrono::seconds(30));
  CHECK(first_error(with(c, "/check/rate_rps", 5)) == "/check/concurrency");  // one or the other
  CHECK(first_error(with(c, "/check/concurrency", 0)) == "/check/concurrency");
  CHECK(first_error(with(c, "/check/concurrency", 2.5)) == "/check/concurrency");
  CHECK(first_error(with(c, "/check/max_concurrency", 4)) == "/check/max_concurrency");
  CHECK(first_error(with(c, "/arrival/process", "all_at_once")) == "/check/concurrency");
  CHECK(first_error(with(c, "/check/warmup_s", 30)) == "/check/warmup_s");
}

TEST_CASE("spec: a concurrency sweep lists its levels") {
  json c = demo();
  c["sweep"] = {{"mode", "concurrency"}, {"levels", {1, 2, 4, 8}}, {"step_duration_s", 20}, {"warmup_s", 2}};
  CHECK(first_error(c).empty());
  json filled = c;
  validator().apply_defaults(filled);
  const auto js = sweep::parse_job_spec(filled).value();
  CHECK(js.sweep.mode == sweep::SweepMode::concurrency);
  CHECK(js.sweep.levels == std::vector<std::uint32_t>{1, 2, 4, 8});
  json defaults = c;
  defaults["sweep"].erase("levels");
  validator().apply_defaults(defaults);
  CHECK(sweep::parse_job_spec(defaults).value().sweep.levels.front() == 1);
  CHECK(first_error(with(c, "/sweep/levels", json::array({1, 4, 4}))) == "/sweep/levels/2");
  CHECK(first_error(with(c, "/sweep/levels", json::array({0}))) == "/sweep/levels/0");
  CHECK(first_error(with(c, "/sweep/levels", json::array())) == "/sweep/levels");
  CHECK(first_error(with(c, "/sweep/mode", "users")) == "/sweep/mode");
  json rate_levels = with(c, "/sweep/mode", "rate");
  CHECK(first_error(rate_levels) == "/sweep/levels");
}

namespace {
json regression_spec();
}  // namespace

TEST_CASE("spec: header values are split off and never part of the visible spec") {
  json d = with(demo(), "/target/headers", json{{"Authorization", "Bearer s3cret"}});
  auto split = sweep::split_secrets(d);
  CHECK(split.visible.dump().find("s3cret") == std::string::npos);
  CHECK(split.visible["target"]["headers"]["Authorization"] == "(secret)");
  CHECK(split.secret_headers["Authorization"] == "Bearer s3cret");
  const json joined = sweep::join_secrets(split.visible, split.secret_headers);
  CHECK(joined["target"]["headers"]["Authorization"] == "Bearer s3cret");
  const auto js = sweep::parse_job_spec(joined).value();
  REQUIRE(js.target.headers.size() == 1);
  CHECK(js.target.headers[0].second == "Bearer s3cret");
  CHECK(sweep::split_secrets(demo()).secret_headers.empty());
}

TEST_CASE("spec: a regression's header values are split off for each target and put back where they were") {
  json r = regression_spec();
  r["baseline"]["target"]["headers"] = {{"Authorization", "Bearer a-secret"}};
  r["candidate"]["target"]["headers"] = {{"Authorization", "Bearer b-secret"}, {"X-Key", "k"}};
  r["judge"] = {{"target", {{"base_url", "http://127.0.0.1:9"}, {"model", "j"}, {"headers", {{"X-J", "j-secret"}}}}},
                {"template", "{answer}"}};
  const auto split = sweep::split_secrets(r);
  const std::string visible = split.visible.dump();
  for (const char* secret : {"a-secret", "b-secret", "j-secret"}) CHECK(visible.find(secret) == std::string::npos);
  CHECK(split.visible["candidate"]["target"]["headers"]["X-Key"] == "(secret)");
  CHECK(split.secret_headers["/candidate/target"]["X-Key"] == "k");
  CHECK(sweep::join_secrets(split.visible, split.secret_headers) == r);
  // A row stored before these keys existed (the flat form) still joins onto "target".
  const json old = sweep::join_secrets(demo(), {{"Authorization", "Bearer x"}});
  CHECK(old["target"]["headers"]["Authorization"] == "Bearer x");
}

TEST_CASE("spec: report.percentiles, target.labels and target.prometheus - values and errors") {
  json spec = demo();
  validator().apply_defaults(spec);
  auto parsed = sweep::parse_job_spec(spec);
  REQUIRE(parsed.has_value());
  CHECK(parsed->report_percentiles == std::vector<double>{50, 90, 95, 99, 99.9});
  CHECK(spec["report"]["percentiles"] == json({50, 90, 95, 99, 99.9}));  // the default is shown in the stored spec

  json chosen = with(demo(), "/report", {{"percentiles", {99.9, 50}}});
  chosen["slo"]["ttft_ms"] = {{"p97", 900}};
  validator().apply_defaults(chosen);
  auto c = sweep::parse_job_spec(chosen);
  REQUIRE(c.has_value());
  CHECK(c->report_percentiles == std::vector<double>{50, 99.9});
  // The summary also carries what the service reads itself and what the SLO names.
  CHECK(sweep::summary_percentiles(*c) == std::vector<double>{50, 95, 97, 99, 99.9});

  CHECK(first_error(with(demo(), "/report", {{"percentiles", {0}}})) == "/report/percentiles/0");
  CHECK(first_error(with(demo(), "/report", {{"percentiles", {100}}})) == "/report/percentiles/0");
  CHECK(first_error(with(demo(), "/report", {{"percentiles", {50, 50}}})) == "/report/percentiles");
  CHECK(first_error(with(demo(), "/report", {{"percentiles", json::array()}})) == "/report/percentiles");
  CHECK(first_error(with(demo(), "/report", {{"percentiles", {"p95"}}})) == "/report/percentiles/0");
  CHECK(first_error(with(demo(), "/report", {{"pct", {95}}})) == "/report/pct");

  CHECK(first_error(with(demo(), "/target/labels", {{"gpu", "H100"}, {"runtime_version", "0.6.3"}})).empty());
  CHECK(first_error(with(demo(), "/target/labels", {{"gpu", 80}})) == "/target/labels/gpu");
  CHECK(first_error(with(demo(), "/target/labels", {{"bad key!", "x"}})) == "/target/labels/bad key!");
  CHECK(first_error(with(demo(), "/target/labels", {{"", "x"}})) == "/target/labels/");

  json prom = demo();
  prom["target"].erase("metrics_url");
  prom["target"]["prometheus"] = {{"url", "http://127.0.0.1:9090"}, {"queries", {{"waiting", "sum(w)"}}}};
  CHECK(first_error(prom).empty());
  validator().apply_defaults(prom);
  auto p = sweep::parse_job_spec(prom);
  REQUIRE(p.has_value());
  REQUIRE(p->prometheus.has_value());
  CHECK(p->prometheus->queries.at("waiting") == "sum(w)");
  CHECK(sweep::side_urls(*p).at(0).first == "/target/prometheus/url");
  CHECK(first_error(with(prom, "/target/prometheus/queries", {{"queue", "x"}})) == "/target/prometheus/queries/queue");
  CHECK(first_error(with(prom, "/target/prometheus/url", "ftp://x")) == "/target/prometheus/url");
  CHECK(first_error(with(prom, "/target/metrics_url", "http://127.0.0.1:8000/metrics")) == "/target/prometheus");
}

TEST_CASE("spec: a think time belongs to a closed loop, and its errors name the field") {
  json closed = demo();
  closed["kind"] = "check";
  closed.erase("sweep");
  closed["check"] = {{"concurrency", 4}, {"duration_s", 10}, {"think_time_ms", {{"dist", "fixed"}, {"value", 500}}}};
  CHECK(first_error(closed).empty());
  validator().apply_defaults(closed);
  auto c = sweep::parse_job_spec(closed);
  REQUIRE(c.has_value());
  REQUIRE(c->check.think_time_ms.has_value());
  CHECK(c->check.think_time_ms->nominal_mean() == 500);
  json rate = closed;
  rate["check"].erase("concurrency");
  rate["check"]["rate_rps"] = 2;
  CHECK(first_error(rate) == "/check/think_time_ms");
  CHECK(first_error(with(closed, "/check/think_time_ms", {{"dist", "lognormal"}, {"median", 10}, {"p95", 5}})) ==
        "/check/think_time_ms/p95");
  CHECK(first_error(with(demo(), "/sweep/think_time_ms", {{"dist", "fixed"}, {"value", 5}})) == "/sweep/think_time_ms");
  json levels = with(demo(), "/sweep/mode", "concurrency");
  CHECK(first_error(with(levels, "/sweep/think_time_ms", {{"dist", "fixed"}, {"value", 5}})).empty());
}

namespace {

json regression_spec() {
  const json target{{"base_url", "http://127.0.0.1:8000"}, {"api", "chat"}, {"model", "m"}};
  json b = target;
  b["base_url"] = "http://127.0.0.1:8001";
  return {{"kind", "regression"},
          {"baseline", {{"target", target}}},
          {"candidate", {{"target", b}}},
          {"regression", {{"rate_rps", 8}, {"duration_s", 30}, {"warmup_s", 5}, {"rounds", 3}}},
          {"quality", {{"dataset", "ds-0123456789abcdef"}, {"checks", {"json", "tool_calls"}}}},
          {"slo", {{"ttft_ms", {{"p95", 800}}}}}};
}

}  // namespace

TEST_CASE("spec: a regression job parses both targets, its thresholds, quality and judge") {
  json spec = regression_spec();
  spec["regression"]["thresholds"] = {{"itl_p95_rise_pct", 15}, {"e2el_p95_rise_pct", 20}};
  spec["regression"]["order"] = "shuffled";
  spec["judge"] = {
      {"target", spec["baseline"]["target"]}, {"template", "Rate {answer} against {reference}"}, {"scale", 5}};
  REQUIRE(first_error(spec).empty());
  validator().apply_defaults(spec);
  const auto s = sweep::parse_job_spec(spec).value();
  CHECK(s.kind == sweep::JobKind::regression);
  CHECK(s.base_url == "http://127.0.0.1:8000");
  REQUIRE(s.candidate.has_value());
  CHECK(s.candidate->base_url == "http://127.0.0.1:8001");
  CHECK(s.regression.rate_rps == 8);
  CHECK(s.regression.order == sweep::RunOrder::shuffled);
  CHECK(s.regression.max_rounds == 0);  // fixed rounds unless asked
  // goodput, TTFT, ITL by default, E2EL asked; ITL's threshold as given.
  REQUIRE(s.regression.metrics.size() == 4);
  CHECK(s.regression.metrics[0].key == "request_goodput");
  CHECK(s.regression.metrics[0].threshold_pct == 5);
  CHECK(s.regression.metrics[2].key == "p95_itl_ms");
  CHECK(s.regression.metrics[2].threshold_pct == 15);
  CHECK(s.regression.metrics[3].key == "p95_e2el_ms");
  CHECK(s.quality->checks.size() == 2);
  CHECK(s.quality->concurrency == 4);
  CHECK(s.judge->scale == 5);
  CHECK(sweep::target_field(s, sweep::Role::candidate) == "/candidate/target");
  const auto urls = sweep::side_urls(s);
  CHECK(std::find(urls.begin(), urls.end(),
                  std::pair<std::string, std::string>{"/candidate/target/base_url", "http://127.0.0.1:8001"}) !=
        urls.end());
}

TEST_CASE("spec: regression errors name the field") {
  const json r = regression_spec();
  CHECK(first_error(without(r, "", "candidate")) == "/candidate");
  CHECK(first_error(with(r, "/target", r["baseline"]["target"])) == "/target");
  CHECK(first_error(with(r, "/candidate/target/model", 5)) == "/candidate/target/model");
  CHECK(first_error(with(r, "/candidate/target/base_url", "ftp://x")) == "/candidate/target/base_url");
  CHECK(first_error(without(r, "/regression", "rate_rps")) == "/regression/rate_rps");
  CHECK(first_error(with(r, "/regression/rounds", 1)) == "/regression/rounds");
  CHECK(first_error(with(r, "/regression/max_rounds", 2)) == "/regression/max_rounds");  // below rounds (3)
  CHECK(first_error(with(r, "/regression/max_rounds", 51)) == "/regression/max_rounds");
  CHECK(first_error(with(r, "/regression/max_rounds", "9")) == "/regression/max_rounds");
  CHECK(first_error(with(r, "/regression/max_rounds", 9)).empty());
  CHECK(first_error(with(r, "/regression/order", "random")) == "/regression/order");
  CHECK(first_error(with(r, "/regression/alpha", 0.9)) == "/regression/alpha");
  CHECK(first_error(with(r, "/regression/thresholds", json{{"itl_p95_rise_pct", -1}})) ==
        "/regression/thresholds/itl_p95_rise_pct");
  CHECK(first_error(with(r, "/regression/from_sweep", "sweep-1")) == "/regression/from_sweep");
  CHECK(first_error(with(r, "/quality/checks", json::array())) == "/quality/checks");
  CHECK(first_error(with(r, "/quality/checks", json{"json", "json"})) == "/quality/checks");
  CHECK(first_error(with(r, "/quality/dataset", "ds-x")) == "/quality/dataset");
  CHECK(first_error(with(r, "/baseline/target/api", "completions")) == "/baseline/target/api");  // tool_calls
  CHECK(first_error(with(r, "/arrival", json{{"process", "all_at_once"}})) == "/arrival/process");
  CHECK(first_error(with(r, "/sweep", json::object())) == "/sweep");
  CHECK(first_error(with(r, "/judge", json{{"target", r["baseline"]["target"]}, {"template", "no placeholder"}})) ==
        "/judge/template");
  // Quality answers and a judge's are read as chat or completions answers: not over Responses.
  CHECK(first_error(with(r, "/candidate/target/api", "responses")) == "/candidate/target/api");
  json responses_judge = r["baseline"]["target"];
  responses_judge["api"] = "responses";
  CHECK(first_error(with(r, "/judge", json{{"target", responses_judge}, {"template", "Rate {answer}"}})) ==
        "/judge/target/api");
  // judge.calibration: 10 to 1000 labelled answers, each score on the judge's scale.
  json labelled = json::array();
  for (int i = 0; i < 10; ++i)
    labelled.push_back({{"question", "q"}, {"reference", "r"}, {"answer", "a"}, {"human_score", 1 + i % 5}});
  const json calibrated = with(r, "/judge",
                               json{{"target", r["baseline"]["target"]},
                                    {"template", "{question} {reference} {answer}"},
                                    {"scale", 5},
                                    {"calibration", {{"items", labelled}}}});
  CHECK(first_error(calibrated).empty());
  {
    json filled = calibrated;
    validator().apply_defaults(filled);
    const auto s = sweep::parse_job_spec(filled).value();
    REQUIRE(s.judge->calibration.has_value());
    CHECK(s.judge->calibration->items.size() == 10);
    CHECK(s.judge->calibration->items[3].human_score == 4);
    CHECK(s.judge->calibration->min_agreement == 0.6);
  }
  json nine = labelled;
  nine.erase(nine.begin());
  CHECK(first_error(with(calibrated, "/judge/calibration/items", nine)) == "/judge/calibration/items");
  CHECK(first_error(with(calibrated, "/judge/calibration/items/3/human_score", 7)) ==
        "/judge/calibration/items/3/human_score");  // the judge's scale is 1..5
  CHECK(first_error(with(calibrated, "/judge/calibration/items/0/human_score", 0)) ==
        "/judge/calibration/items/0/human_score");
  CHECK(first_error(without(calibrated, "/judge/calibration/items/2", "answer")) ==
        "/judge/calibration/items/2/answer");
  CHECK(first_error(with(calibrated, "/judge/calibration/min_agreement", 1.5)) == "/judge/calibration/min_agreement");
  CHECK(first_error(with(calibrated, "/judge/calibration/p59", 1)) == "/judge/calibration/p59");
  // The parser alone (no schema before it) names the same fields.
  json raw = calibrated;
  raw["judge"]["calibration"]["items"] = "all of them";
  CHECK(sweep::parse_job_spec(raw).error().field == "/judge/calibration/items");
  raw["judge"]["calibration"]["items"] = labelled;
  raw["judge"]["calibration"]["items"][4]["question"] = 5;
  CHECK(sweep::parse_job_spec(raw).error().field == "/judge/calibration/items/4/question");
  json no_quality = without(r, "", "quality");
  CHECK(first_error(with(no_quality, "/judge", json{{"target", r["baseline"]["target"]}, {"template", "{answer}"}})) ==
        "/judge");
  // The regression blocks belong to regression jobs only.
  json check = demo();
  check["regression"] = r["regression"];
  CHECK(first_error(check) == "/regression");
  json with_side = demo();
  with_side["candidate"] = r["candidate"];
  CHECK(first_error(with_side) == "/candidate");
}

TEST_CASE("spec: the step block - a sweep's steps stopped when decided, values and errors") {
  const json d = demo();
  auto parsed = [](json spec) {
    REQUIRE(validator().validate(spec).has_value());
    validator().apply_defaults(spec);
    return sweep::parse_job_spec(spec).value();
  };
  SECTION("absent or fixed: every step runs its length") {
    CHECK(parsed(d).step.stop == sweep::StepStop::fixed);
    CHECK(parsed(with(d, "/step", json{{"stop", "fixed"}})).step.stop == sweep::StepStop::fixed);
  }
  SECTION("decided, with defaults and with values") {
    const auto a = parsed(with(d, "/step", json{{"stop", "decided"}}));
    CHECK(a.step.stop == sweep::StepStop::decided);
    CHECK(a.step.decide.min_time == std::min<Nanos>(std::chrono::seconds(10), a.sweep.step_duration));
    CHECK(a.step.decide.min_requests == 20);
    CHECK(a.step.decide.looks == 20);
    CHECK_FALSE(a.step.max);
    const auto b = parsed(
        with(d, "/step", json{{"stop", "decided"}, {"min_s", 3}, {"min_requests", 50}, {"max_s", 90}, {"looks", 8}}));
    CHECK(b.step.decide.min_time == std::chrono::seconds(3));
    CHECK(b.step.decide.min_requests == 50);
    CHECK(b.step.decide.looks == 8);
    CHECK(*b.step.max == std::chrono::seconds(90));
  }
  SECTION("errors name the field") {
    CHECK(first_error(with(d, "/step", json{{"stop", "early"}})) == "/step/stop");
    CHECK(first_error(with(d, "/step", json{{"stop", "fixed"}, {"min_s", 5}})) == "/step/min_s");
    CHECK(first_error(with(d, "/step", json{{"stop", "decided"}, {"min_s", -1}})) == "/step/min_s");
    CHECK(first_error(with(d, "/step", json{{"stop", "decided"}, {"min_requests", 0}})) == "/step/min_requests");
    CHECK(first_error(with(d, "/step", json{{"stop", "decided"}, {"looks", 101}})) == "/step/looks");
    CHECK(first_error(with(d, "/step", json{{"stop", "decided"}, {"min_s", 20}, {"max_s", 10}})) == "/step/max_s");
    CHECK(first_error(with(with(d, "/step", json{{"stop", "decided"}, {"max_s", 600}}), "/sweep/max_step_duration_s",
                           120)) == "/step/max_s");
    CHECK(first_error(with(d, "/step", json{{"stop", "decided"}, {"typo_key", 1}})) == "/step/typo_key");
    CHECK(first_error(with(with(d, "/step", json{{"stop", "decided"}}), "/sweep/mode", "concurrency")) == "/step/stop");
    json check = without(with(d, "/step", json{{"stop", "decided"}}), "", "sweep");
    check["kind"] = "check";
    check["check"] = {{"rate_rps", 2}, {"duration_s", 5}};
    CHECK(first_error(check) == "/step");
  }
}

TEST_CASE("spec: a sweep that leaves max_rate_rps open escalates no higher than its longest step's request limit") {
  ServiceLimits limits;  // 20,000 req/s, 1,000,000 requests per step
  REQUIRE(limits.max_rate_rps == 20000);
  const auto admit = [&limits](json spec) {
    validator().apply_defaults(spec);
    auto parsed = sweep::parse_job_spec(spec);
    REQUIRE(parsed.has_value());
    auto refused = sweep::rules(parsed->kind).admit(limits, *parsed, spec);
    return std::pair{refused, spec};
  };
  json spec = demo();
  spec["sweep"] = {{"step_duration_s", 60}, {"warmup_s", 10}};
  auto [refused, stored] = admit(spec);
  CHECK_FALSE(refused.has_value());                   // 20,000 req/s x 70 s would be 1.4 M: the ceiling comes down
  CHECK(stored["sweep"]["max_rate_rps"] == 14285.0);  // floor(1,000,000 / 70)
  // A decided step may run twice the step (130 s): lower still.
  spec["step"] = {{"stop", "decided"}};
  auto [refused_decided, stored_decided] = admit(spec);
  CHECK_FALSE(refused_decided.has_value());
  CHECK(stored_decided["sweep"]["max_rate_rps"] == 7692.0);  // floor(1,000,000 / 130)
  // Short steps reach the service's own limit.
  spec.erase("step");
  spec["sweep"] = {{"step_duration_s", 10}, {"warmup_s", 2}};
  CHECK(admit(spec).second["sweep"]["max_rate_rps"] == 20000.0);
  // A rate the spec gives is held to the limit, not lowered: refused, naming it.
  spec["sweep"] = {{"step_duration_s", 60}, {"warmup_s", 10}, {"max_rate_rps", 20000}};
  auto [explicit_refused, unused] = admit(spec);
  REQUIRE(explicit_refused.has_value());
  CHECK(explicit_refused->field == "/sweep/max_rate_rps");
}

TEST_CASE("spec: a check replays a trace at its speed, with a dataset, and its settings are the trace's alone") {
  json check = with(demo(), "/kind", "check");
  check.erase("sweep");
  check["check"] = {{"duration_s", 20}};
  check["arrival"] = {{"process", "trace"}, {"speed", 2}, {"loop", true}};
  check["workload"] = {{"dataset", {{"id", "ds-0123456789abcdef"}, {"block_tokens", 64}}}};
  REQUIRE(first_error(check).empty());
  validator().apply_defaults(check);
  const auto js = sweep::parse_job_spec(check).value();
  CHECK(js.arrival.process == ArrivalProcess::trace);
  CHECK(js.arrival.speed == 2);
  CHECK(js.arrival.loop);
  CHECK(js.workload.dataset->block_tokens == 64);

  CHECK(first_error(with(check, "/check/rate_rps", 5)) == "/check/rate_rps");
  CHECK(first_error(without(check, "", "workload")) == "/workload/dataset");
  CHECK(first_error(with(check, "/workload/dataset/order", "shuffled")) == "/workload/dataset/order");
  CHECK(first_error(with(check, "/arrival/speed", 0)) == "/arrival/speed");
  CHECK(first_error(with(check, "/workload/dataset/block_tokens", 0)) == "/workload/dataset/block_tokens");
  CHECK(first_error(with(demo(), "/arrival", json{{"process", "poisson"}, {"speed", 2}})) == "/arrival/speed");
}

TEST_CASE("spec: a sweep or a rated regression scales a trace to its rates: speed and loop are refused") {
  const json dataset = {{"dataset", {{"id", "ds-0123456789abcdef"}}}};
  json sweep = with(demo(), "/arrival", json{{"process", "trace"}});
  sweep["workload"] = dataset;
  REQUIRE(first_error(sweep).empty());
  CHECK(first_error(with(sweep, "/arrival/speed", 2)) == "/arrival/speed");
  CHECK(first_error(with(sweep, "/arrival/loop", false)) == "/arrival/loop");
  CHECK(first_error(without(sweep, "", "workload")) == "/workload/dataset");

  json rated = regression_spec();
  rated["arrival"] = {{"process", "trace"}};
  rated["workload"] = dataset;
  REQUIRE(first_error(rated).empty());
  CHECK(first_error(with(rated, "/arrival/loop", true)) == "/arrival/loop");
  // Without a rate, the runs replay the trace at its own (arrival.speed, loop as given).
  json own = without(rated, "/regression", "rate_rps");
  own["arrival"] = {{"process", "trace"}, {"speed", 3}, {"loop", true}};
  REQUIRE(first_error(own).empty());
  validator().apply_defaults(own);
  const auto js = sweep::parse_job_spec(own).value();
  CHECK(js.regression.rate_rps == 0);
  CHECK(js.arrival.speed == 3);
  // Without a trace a regression still needs its rate.
  CHECK(first_error(without(regression_spec(), "/regression", "rate_rps")) == "/regression/rate_rps");
  CHECK(first_error(with(demo(), "/arrival", json{{"process", "poisson"}, {"speed", 2}})) == "/arrival/speed");
  CHECK(first_error(with(demo(), "/arrival", json{{"process", "poisson"}, {"loop", true}})) == "/arrival/loop");
}

TEST_CASE("spec: the traffic table makes the refusals between what a step sends, naming the field") {
  // A row load agents may not send: refused on agents only, at its own field.
  sweep::register_traffic({.name = "engine-only test traffic",
                           .field = "/name",
                           .on = [](const sweep::JobSpec& js) { return js.name == "engine-only"; },
                           .agent_safe = false});
  const json named = with(demo(), "/name", "engine-only");
  CHECK(first_error(named).empty());
  CHECK(first_error(with(named, "/agents", 2)) == "/name");
  CHECK(first_error(with(demo(), "/agents", 2)).empty());
  // A row chained to answers, with one that presumes independent requests: refused at the
  // latter's field (the engine-only row is neither: sessions go with it).
  CHECK(first_error(with(named, "/workload/sessions", json{{"turns", 2}})).empty());
  CHECK(first_error(with(with(named, "/workload/sessions", json{{"turns", 2}}), "/workload/abandon",
                         json{{"no_first_token_s", 2}})) == "/workload/abandon");
  const auto names = sweep::traffic_names();
  for (const char* n : {"sessions", "trace replay", "abandonment", "decided stop", "engine-only test traffic"}) {
    CHECK(std::find(names.begin(), names.end(), n) != names.end());
  }
  CHECK_THROWS_AS(
      sweep::register_traffic({.name = "sessions", .field = "/x", .on = [](const sweep::JobSpec&) { return false; }}),
      std::invalid_argument);
  CHECK_THROWS_AS(
      sweep::register_traffic({.name = "no field", .field = "x", .on = [](const sweep::JobSpec&) { return false; }}),
      std::invalid_argument);
  CHECK_THROWS_AS(sweep::register_traffic({.name = "no test", .field = "/x"}), std::invalid_argument);
}

TEST_CASE("spec: sessions go with every kind but what presumes independent requests, errors naming the field") {
  const json sessions = {
      {"turns", 4}, {"think_time_ms", {{"dist", "fixed"}, {"value", 500}}}, {"history", "reference"}};
  json sweep = with(demo(), "/workload/sessions", sessions);
  REQUIRE(first_error(sweep).empty());
  validator().apply_defaults(sweep);
  const auto js = sweep::parse_job_spec(sweep).value();
  REQUIRE(js.workload.sessions.has_value());
  CHECK(js.workload.sessions->turns.upper_bound() == 4);
  CHECK(js.workload.sessions->history == llm::History::reference);

  CHECK(first_error(with(demo(), "/workload/sessions/turns", 0)) == "/workload/sessions/turns");
  CHECK(first_error(with(demo(), "/workload/sessions/history", "mine")) == "/workload/sessions/history");
  CHECK(first_error(with(demo(), "/workload/sessions/turn", 3)).rfind("/workload/sessions", 0) == 0);
  CHECK(first_error(with(sweep, "/workload/abandon", json{{"no_first_token_s", 2}})) == "/workload/abandon");
  CHECK(first_error(with(sweep, "/step", json{{"stop", "decided"}})) == "/step/stop");
  json trace = with(demo(), "/kind", "check");
  trace.erase("sweep");
  trace["check"] = {{"duration_s", 20}};
  trace["arrival"] = {{"process", "trace"}};
  trace["workload"] = {{"dataset", {{"id", "ds-0123456789abcdef"}}}, {"sessions", sessions}};
  CHECK(first_error(trace) == "/workload/sessions");
  // A dataset's conversations give their own turns: a count of turns with one is refused.
  // (checked at submit, before the schema's defaults fill the spec in)
  json dataset = {{"dataset", {{"id", "ds-0123456789abcdef"}}}, {"sessions", sessions}};
  const auto refused = llm::check_dataset_workload(dataset);
  REQUIRE(refused.has_value());
  CHECK(refused->field == "/workload/sessions/turns");
  dataset["sessions"].erase("turns");
  CHECK_FALSE(llm::check_dataset_workload(dataset).has_value());
  CHECK(first_error(with(demo(), "/workload", dataset)).empty());
}

TEST_CASE("spec: a history the server keeps needs a target API that keeps conversations") {
  const json kept = {{"turns", 3}, {"history", "server_state"}};
  const json sweep = with(demo(), "/workload/sessions", kept);
  // The demo's completions target keeps nothing: refused where the history is asked for.
  CHECK(first_error(sweep) == "/workload/sessions/history");
  CHECK(first_error(with(sweep, "/target/api", "chat")) == "/workload/sessions/history");
  json responses = with(sweep, "/target/api", "responses");
  REQUIRE(first_error(responses).empty());
  validator().apply_defaults(responses);
  const auto js = sweep::parse_job_spec(responses).value();
  CHECK(js.workload.sessions->history == llm::History::server_state);
}

TEST_CASE("spec: an API of no generated tokens takes E2EL bounds only, and the items of its own kind") {
  json embed = with(demo(), "/target/api", "embeddings");
  embed["slo"] = {{"e2el_ms", {{"p95", 200}}}, {"max_error_rate", 0.01}, {"goodput", {{"e2el_ms", 150}}}};
  embed["workload"]["inputs_per_request"] = {{"dist", "uniform"}, {"min", 1}, {"max", 16}};
  REQUIRE(first_error(embed).empty());
  validator().apply_defaults(embed);
  const auto js = sweep::parse_job_spec(embed).value();
  REQUIRE(js.workload.items.has_value());
  CHECK(js.workload.items->count.upper_bound() == 16);
  CHECK_FALSE(js.target.stream);
  // Bounds on latencies of tokens are refused where they are asked for.
  CHECK(first_error(with(embed, "/slo/ttft_ms", json{{"p95", 800}})) == "/slo/ttft_ms");
  CHECK(first_error(with(embed, "/slo/itl_ms", json{{"p95", 50}})) == "/slo/itl_ms");
  CHECK(first_error(with(embed, "/slo/goodput/tpot_ms", 50)) == "/slo/goodput/tpot_ms");
  CHECK(first_error(with(embed, "/workload/abandon", json{{"no_first_token_s", 2}})) == "/workload/abandon");
  // Another API's items; items for an API of none.
  CHECK(first_error(with(without(embed, "/workload", "inputs_per_request"), "/workload/documents_per_request", 4)) ==
        "/workload/documents_per_request");
  CHECK(first_error(with(demo(), "/workload/inputs_per_request", 2)) == "/workload/inputs_per_request");
  json rerank = with(without(embed, "/workload", "inputs_per_request"), "/target/api", "rerank");
  CHECK(first_error(with(rerank, "/workload/documents_per_request", 8)).empty());
  CHECK(first_error(with(rerank, "/target/path", "/rerank")).empty());
  CHECK(first_error(with(rerank, "/target/path", "rerank")) == "/target/path");
}

TEST_CASE("spec: a regression or a scenario over an API of no generated tokens is refused, naming its API") {
  json spec = regression_spec();
  spec.erase("quality");
  spec["slo"] = {{"e2el_ms", {{"p95", 200}}}};
  REQUIRE(first_error(spec).empty());
  spec["candidate"]["target"]["api"] = "embeddings";
  CHECK(first_error(spec) == "/candidate/target/api");
  spec["baseline"]["target"]["api"] = "rerank";
  CHECK(first_error(spec) == "/baseline/target/api");
}

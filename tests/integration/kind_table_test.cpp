// A fifth kind of job added through the kinds table alone: this file registers "twice" (one
// fixed-rate step, then one at twice the rate; it passes when both meet the SLO) and runs it
// through the real API on loopback, the job manager and the store, to a stored verdict. Nothing
// outside this file knows the kind: the schema, the parser, the admission, the planner and the
// step's settings all come from its descriptor.

#include <catch2/catch.hpp>

#include "support/service_fixture.hpp"
#include "sweep/kinds.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

Nanos seconds(double s) {
  return std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(s));
}

// The "twice" kind's descriptor: its block {"twice": {"rate_rps", "duration_s"}}.
sweep::KindRules twice_kind() {
  sweep::KindRules k;
  k.name = "twice";
  k.blocks = {"twice"};
  k.block_schemas = {{"twice",
                      {{"type", "object"},
                       {"additionalProperties", false},
                       {"required", {"rate_rps"}},
                       {"properties",
                        {{"rate_rps", {{"type", "number"}, {"exclusiveMinimum", 0}}},
                         {"duration_s", {{"type", "number"}, {"exclusiveMinimum", 0}, {"default", 2}}}}}}}};
  k.parse = [](const json& spec, sweep::JobSpec& js) -> std::optional<Error> {
    if (!spec.contains("twice")) return invalid("/twice", "is required for a twice job");
    const json& t = spec.at("twice");
    if (t.value("duration_s", 2.0) > 30) return invalid("/twice/duration_s", "at most 30 s here");
    js.kind_settings = t;
    return std::nullopt;
  };
  k.admit = [](const ServiceLimits& l, const sweep::JobSpec& js, json&) -> std::optional<Error> {
    if (2 * js.kind_settings.value("rate_rps", 0.0) > l.max_rate_rps) {
      return invalid("/twice/rate_rps", "twice the rate exceeds the service's limit");
    }
    return std::nullopt;
  };
  k.next_action = [](const sweep::JobSpec& js, const std::vector<sweep::StepOutcome>& steps) -> sweep::Action {
    if (steps.size() == 2) {
      const bool pass = steps[0].verdict == Verdict::pass && steps[1].verdict == Verdict::pass;
      return sweep::Finish{{{"verdict", pass ? "pass" : "fail"},
                            {"rates", {steps[0].offered_rate_rps, steps[1].offered_rate_rps}},
                            {"completed", steps[0].completed + steps[1].completed}}};
    }
    sweep::StepOrder o;
    o.kind = sweep::StepKind::check;
    o.phase = steps.empty() ? "once" : "twice";
    o.rate_rps = js.kind_settings.value("rate_rps", 1.0) * static_cast<double>(steps.size() + 1);
    o.duration = seconds(js.kind_settings.value("duration_s", 2.0));
    return o;
  };
  k.progress = [](const sweep::JobSpec&, const std::vector<sweep::StepOutcome>& steps) {
    return sweep::Plan{2, steps.size() >= 2 ? "done" : "running"};
  };
  k.step_length = [](const sweep::JobSpec& js) { return seconds(js.kind_settings.value("duration_s", 2.0)); };
  k.drain_timeout = [](const sweep::JobSpec&) { return Nanos{std::chrono::seconds(5)}; };
  return k;
}

json twice_job(double rate) {
  return {
      {"name", "fifth"},
      {"kind", "twice"},
      {"target", {{"base_url", "http://127.0.0.1:9"}, {"model", "m"}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 8}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 4}}}}},
      {"arrival", {{"process", "constant"}}},
      {"slo", {{"ttft_ms", {{"p95", 800}}}}},
      {"twice", {{"rate_rps", rate}, {"duration_s", 2}}}};
}

}  // namespace

TEST_CASE("kinds: a fifth kind registered from one file runs through the API to a stored verdict") {
  static const sweep::JobKind twice = sweep::register_kind(twice_kind());
  CHECK(sweep::to_string(twice) == "twice");
  CHECK(sweep::parse_job_kind("twice") == twice);

  testing::FakeModel fast;
  fast.ttft = 5ms;
  testing::Service s("kinds", fast);

  // Its own block is checked by the schema it brought, and by its own limits.
  json unknown_key = twice_job(20);
  unknown_key["twice"]["rate"] = 5;
  auto r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", unknown_key.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/twice/rate");
  r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", twice_job(15000).dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/twice/rate_rps");
  // Another kind's block in it is refused, and its block in another kind's spec too.
  json with_check = twice_job(20);
  with_check["check"] = {{"rate_rps", 5}};
  r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", with_check.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/check");
  json check_with_twice = twice_job(20);
  check_with_twice["kind"] = "check";
  check_with_twice["check"] = {{"rate_rps", 5}, {"duration_s", 1}, {"warmup_s", 0}};
  r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", check_with_twice.dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/twice");

  // Accepted, run (two steps: 50 then 100 req/s for 2 s each, enough requests for a p95 to be
  // decided), judged and stored.
  r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", twice_job(50).dump());
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body).value("id", "");
  const json job = s.wait_end(id);
  CHECK(job.value("kind", "") == "twice");
  REQUIRE(job.value("status", "") == "succeeded");
  const json& result = job["result"];
  CHECK(result.value("verdict", "") == "pass");
  CHECK(result["rates"] == json::array({50.0, 100.0}));
  CHECK(result.value("completed", 0) == 300);                   // 100 + 200 requests, every one answered
  CHECK(job["spec"]["twice"].value("duration_s", 0.0) == 2.0);  // its schema's default, stored

  r = testing::http_request(s.endpoint, "GET", "/v1/sweeps/" + id + "/steps");
  REQUIRE(r.status == 200);
  const json steps = json::parse(r.body);
  const json& list = steps.is_array() ? steps : steps["steps"];
  REQUIRE(list.size() == 2);
  CHECK(list[0].value("phase", "") == "once");
  CHECK(list[1].value("phase", "") == "twice");
  CHECK(list[1].value("verdict", "") == "pass");
}

TEST_CASE("kinds: the table refuses a kind whose name is taken or that lacks a planner") {
  sweep::KindRules again = twice_kind();
  again.name = "check";
  CHECK_THROWS_AS(sweep::register_kind(again), std::invalid_argument);
  sweep::KindRules partial = twice_kind();
  partial.name = "partial";
  partial.next_action = nullptr;
  CHECK_THROWS_AS(sweep::register_kind(partial), std::invalid_argument);
  CHECK_FALSE(sweep::parse_job_kind("partial"));
  // The four kinds are in JobKind's order.
  CHECK(sweep::to_string(sweep::JobKind::sweep) == "sweep");
  CHECK(sweep::to_string(sweep::JobKind::check) == "check");
  CHECK(sweep::to_string(sweep::JobKind::regression) == "regression");
  CHECK(sweep::to_string(sweep::JobKind::scenario) == "scenario");
}

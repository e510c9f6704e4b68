// One load step planned once (loadgen/load_plan.hpp): the settings' shapes, the wire form an
// agent is sent, and the plan capsweepd and every agent make of it.
#include "loadgen/load_plan.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/random.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

loadgen::LoadSettings rate_step() {
  loadgen::LoadSettings s;
  s.shape = loadgen::StepShape::arrivals;
  s.arrival.process = ArrivalProcess::gamma;
  s.arrival.burstiness = 0.5;
  s.rate_rps = 12.5;
  s.duration = 3s;
  s.warmup = 500ms;
  s.concurrency = 8;
  s.seed = 7;
  s.draw = 4;
  s.drain_timeout = 20s;
  s.goodput.ttft = 800ms;
  s.prefix_cache = llm::PrefixCache::cold;
  s.job_id = "sw-9";
  s.max_connections = 64;
  return s;
}

std::string first_error(const json& j) {
  auto parsed = loadgen::parse_load_settings(j);
  return parsed ? std::string() : parsed.error().field;
}

}  // namespace

TEST_CASE("load plan: an arrivals step is planned from its settings alone") {
  const auto ss = loadgen::plan_load_step(rate_step(), {}).value();
  CHECK(ss.mode == loadgen::Mode::rate);
  CHECK(ss.arrival.process == ArrivalProcess::gamma);
  CHECK(ss.arrival.rate_rps == 12.5);
  CHECK(ss.duration == 3500ms);  // the warm-up and the measured part
  CHECK(ss.warmup == 500ms);
  CHECK(ss.seed == 7 * 1'000'003ULL + 4);
  CHECK(ss.request_index_base == (std::uint64_t{4} << 32));
  CHECK(ss.prompt_salt == llm::prompt_salt("sw-9", ss.request_index_base));
  CHECK_FALSE(ss.warm_prefixes);
  CHECK(ss.concurrency == 8);
  CHECK(ss.goodput.ttft == 800ms);
  CHECK(ss.drain_timeout == 20s);
  auto capped = rate_step();
  capped.concurrency = 0;  // no cap of its own: the service's
  CHECK(loadgen::plan_load_step(capped, {})->concurrency == 64);
  capped.concurrency = 200;
  CHECK(loadgen::plan_load_step(capped, {})->concurrency == 64);
  capped.prefix_cache = llm::PrefixCache::as_found;
  CHECK(loadgen::plan_load_step(capped, {})->prompt_salt == 0);
  capped.prefix_cache = llm::PrefixCache::warm;
  CHECK(loadgen::plan_load_step(capped, {})->warm_prefixes);
}

TEST_CASE("load plan: one at a time, a burst and users each make their own mode and limits") {
  auto s = rate_step();
  s.shape = loadgen::StepShape::one_by_one;
  s.requests = 5;
  auto ss = loadgen::plan_load_step(s, {}).value();
  CHECK(ss.mode == loadgen::Mode::concurrency);
  CHECK(ss.concurrency == 1);
  CHECK(ss.requests == 5u);
  CHECK(ss.duration == 5 * std::chrono::duration_cast<Nanos>(600s));
  s.shape = loadgen::StepShape::burst;
  ss = loadgen::plan_load_step(s, {}).value();
  CHECK(ss.mode == loadgen::Mode::rate);
  CHECK(ss.arrival.process == ArrivalProcess::all_at_once);
  s.shape = loadgen::StepShape::users;
  s.think_time_ms = LengthDist::fixed(250);
  ss = loadgen::plan_load_step(s, {}).value();
  CHECK(ss.mode == loadgen::Mode::concurrency);
  REQUIRE(ss.think_time_ms);
  CHECK(ss.think_time_ms->upper_bound() == 250);
  CHECK_FALSE(ss.decide);
}

TEST_CASE("load plan: a trace is replayed by the plan, at the step's rate or at its own speed") {
  auto s = rate_step();
  s.arrival.process = ArrivalProcess::trace;
  s.requests = 4;
  const std::vector<Nanos> offsets{0ms, 100ms, 300ms, 600ms};
  s.rate_rps = 0;  // the trace's own times
  auto own = loadgen::plan_load_step(s, offsets).value();
  REQUIRE(own.schedule);
  CHECK(own.schedule->send_times == offsets);
  s.arrival.speed = 2;
  CHECK(loadgen::plan_load_step(s, offsets).value().schedule->send_times.back() == 300ms);
  auto none = loadgen::plan_load_step(s, {});
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().message.find("trace cannot be replayed") != std::string::npos);
  s.shape = loadgen::StepShape::profile;  // a schedule made beforehand: none replayed
  CHECK_FALSE(loadgen::plan_load_step(s, {}).value().schedule);
}

TEST_CASE("load plan: the settings round-trip on the agents' wire, the same plan on both sides") {
  auto s = rate_step();
  s.arrival.process = ArrivalProcess::poisson;
  s.requests = 40;
  s.think_time_ms = LengthDist::lognormal(300, 900, 1, 5000).value();
  s.decide = loadgen::DecidedStop{};  // never sent: an agent's share is not decided early
  s.metrics_url = "http://127.0.0.1:9/metrics";
  s.trace_id = step_trace_id("sw-wire", 2);
  const auto back = loadgen::parse_load_settings(loadgen::to_json(s));
  REQUIRE(back.has_value());
  CHECK(back->trace_id == s.trace_id);
  CHECK(loadgen::to_json(*back) == loadgen::to_json(s));
  CHECK_FALSE(back->decide);
  CHECK(back->metrics_url.empty());
  const auto here = loadgen::plan_load_step(s, {}).value();
  const auto there = loadgen::plan_load_step(*back, {}).value();
  CHECK(there.seed == here.seed);
  CHECK(there.trace_id == s.trace_id);  // both send the step's traceparent
  CHECK(there.prompt_salt == here.prompt_salt);
  const auto a = make_schedule(here.arrival, {here.duration, here.requests}, here.seed).value();
  const auto b = make_schedule(there.arrival, {there.duration, there.requests}, there.seed).value();
  CHECK(schedule_digest(a) == schedule_digest(b));
  // The think time comes back draw for draw.
  REQUIRE(back->think_time_ms);
  Rng r1(11), r2(11);
  for (int i = 0; i < 100; ++i) CHECK(s.think_time_ms->sample(r1) == back->think_time_ms->sample(r2));
  s.rate_rps = INFINITY;
  CHECK(std::isinf(loadgen::parse_load_settings(loadgen::to_json(s))->rate_rps));
}

TEST_CASE("load plan: malformed settings are refused, naming the field") {
  const json good = loadgen::to_json(rate_step());
  CHECK(first_error(good).empty());
  json bad = good;
  bad["shape"] = "nonsense";
  CHECK(first_error(bad) == "/payload/load/shape");
  bad = good;
  bad.erase("draw");
  CHECK(first_error(bad) == "/payload/load/draw");
  bad = good;
  bad["concurrency"] = -1;
  CHECK(first_error(bad) == "/payload/load/concurrency");
  bad = good;
  bad["max_connections"] = 1e12;
  CHECK(first_error(bad) == "/payload/load/max_connections");
  bad = good;
  bad["arrival"]["process"] = "bursty";
  CHECK(first_error(bad) == "/payload/load/arrival/process");
  bad = good;
  bad["prefix_cache"] = "hot";
  CHECK(first_error(bad) == "/payload/load/prefix_cache");
  bad = good;
  bad["think_time_ms"] = {{"dist", "fixed"}};
  CHECK(first_error(bad) == "/payload/load/think_time_ms/value");
  // A trace id: absent or null is none, else 32 lowercase hex digits, not all zeros.
  bad = good;
  bad.erase("trace_id");
  CHECK(first_error(bad).empty());
  CHECK_FALSE(loadgen::parse_load_settings(bad)->trace_id.valid());
  for (const json& id : {json("00000000000000000000000000000000"), json("4BF92F3577B34DA6A3CE929D0E0E4736"),
                         json("4bf92f35"), json(12)}) {
    bad["trace_id"] = id;
    CHECK(first_error(bad) == "/payload/load/trace_id");
  }
  CHECK(first_error(json::array()) == "/payload/load");
}

TEST_CASE("load plan: an agent's payload round-trips, and malformed ones are refused") {
  loadgen::AgentStep s;
  s.load = rate_step();
  s.target = {{"base_url", "http://127.0.0.1:9"}, {"model", "m"}};
  s.workload = {{"seed", 3}};
  s.tokens_per_word = 1.3;
  s.dataset = "{\"prompt\": \"hi\"}\n";
  s.dataset_format = "jsonl";
  auto p = loadgen::parse_agent_step(loadgen::to_json(s));
  REQUIRE(p.has_value());
  CHECK(p->load.job_id == "sw-9");
  CHECK(p->target == s.target);
  CHECK(p->workload == s.workload);
  CHECK(p->tokens_per_word == 1.3);
  CHECK(p->dataset == s.dataset);
  json pj = loadgen::to_json(s);
  pj["tokens_per_word"] = 0;
  CHECK(loadgen::parse_agent_step(pj).error().field == "/payload/tokens_per_word");
  pj = loadgen::to_json(s);
  pj.erase("target");
  CHECK(loadgen::parse_agent_step(pj).error().field == "/payload/target");
  pj = loadgen::to_json(s);
  pj["workload"] = "w";
  CHECK(loadgen::parse_agent_step(pj).error().field == "/payload/workload");
  pj = loadgen::to_json(s);
  pj["load"]["job_id"] = 5;
  CHECK(loadgen::parse_agent_step(pj).error().field == "/payload/load/job_id");
  pj = loadgen::to_json(s);
  pj["dataset"] = "x";
  CHECK(loadgen::parse_agent_step(pj).error().field == "/payload/dataset");
}

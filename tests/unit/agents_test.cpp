// Load agents: the record wire format, the clock estimate, the hub's protocol and its faults,
// the step a payload makes, and the Indexed Job that runs the agents.
#include "sweep/agents.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "loadgen/agent_hub.hpp"
#include "loadgen/agent_wire.hpp"
#include "sweep/agent_jobs.hpp"
#include "sweep/spec.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

RequestRecord sample_record() {
  RequestRecord r;
  r.scheduled = 1'000'000ns;
  r.dispatched = 1'000'500ns;
  r.sent = 1'001'000ns;
  r.finished = 90'000'123ns;
  r.input_tokens = 200;
  r.output_tokens = 7;
  r.reasoning_tokens = 2;
  r.output_tokens_estimated = true;
  r.turn = 3;
  r.outcome = Outcome::abandoned;
  r.chunks = {{20'000'000ns, 1, true}, {25'000'000ns, 1, true}, {30'000'001ns, 3, false}, {31'000'000ns, 2, false}};
  return r;
}

json ids(std::uint32_t index, std::uint64_t epoch = 1) {
  return {{"run_id", "sw-1"}, {"index", index}, {"epoch", epoch}};
}

json with(json base, const json& more) {
  for (auto it = more.begin(); it != more.end(); ++it) base[it.key()] = it.value();
  return base;
}

// A rate step's expectation: `n` requests, each scheduled at `at`.
std::shared_ptr<const loadgen::StepExpectation> expect_times(std::size_t n, Nanos at = 0ns,
                                                             std::uint32_t max_turns = 0) {
  auto e = std::make_shared<loadgen::StepExpectation>();
  e->send_times.assign(n, at);
  e->max_turns = max_turns;
  return e;
}

loadgen::AgentHubSettings quick() {
  loadgen::AgentHubSettings s;
  s.join_timeout = 2s;
  s.go_lead = 50ms;
  s.heartbeat_loss = 400ms;
  s.end_grace = 1s;
  return s;
}

}  // namespace

TEST_CASE("agents: a record crosses the wire exactly") {
  const RequestRecord r = sample_record();
  const json j = loadgen::encode_record(42, r);
  auto back = loadgen::decode_record(json::parse(j.dump()), "/records/0");
  REQUIRE(back.has_value());
  CHECK(back->index == 42);
  const RequestRecord& b = back->rec;
  CHECK(b.scheduled == r.scheduled);
  CHECK(b.dispatched == r.dispatched);
  CHECK(b.sent == r.sent);
  CHECK(b.finished == r.finished);
  CHECK(b.input_tokens == 200);
  CHECK(b.output_tokens == 7);
  CHECK(b.reasoning_tokens == 2);
  CHECK(b.output_tokens_estimated);
  CHECK(b.streamed);
  CHECK(b.turn == 3);
  CHECK(b.outcome == Outcome::abandoned);
  REQUIRE(b.chunks.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(b.chunks[i].arrival == r.chunks[i].arrival);
    CHECK(b.chunks[i].tokens == r.chunks[i].tokens);
    CHECK(b.chunks[i].reasoning == r.chunks[i].reasoning);
  }
  // Every chunk of one token: no token list on the wire.
  RequestRecord ones;
  ones.chunks = {{5ns, 1, false}, {9ns, 1, false}};
  ones.streamed = false;
  const json o = loadgen::encode_record(1, ones);
  CHECK(o[12].empty());
  auto ob = loadgen::decode_record(o, "/r");
  REQUIRE(ob.has_value());
  CHECK(!ob->rec.streamed);
  CHECK(ob->rec.chunks[1].arrival == 9ns);
}

TEST_CASE("agents: a malformed record is refused, naming the element") {
  const json good = loadgen::encode_record(7, sample_record());
  auto refused = [&](json bad, const std::string& field) {
    auto r = loadgen::decode_record(bad, "/records/3");
    REQUIRE(!r.has_value());
    CHECK(r.error().field == field);
  };
  refused(json::array({1, 2, 3}), "/records/3");
  refused(json::object(), "/records/3");
  json b = good;
  b[0] = -1;
  refused(b, "/records/3/0");
  b = good;
  b[2] = "soon";
  refused(b, "/records/3/2");
  b = good;
  b[6] = -5;
  refused(b, "/records/3/6");
  b = good;
  b[8] = 99;
  refused(b, "/records/3/8");
  b = good;
  b[9] = 70000;
  refused(b, "/records/3/9");
  b = good;
  b[10] = 8;
  refused(b, "/records/3/10");
  b = good;
  b[10] = 4;  // no generated tokens, yet 7 output tokens in 4 chunks
  refused(b, "/records/3/11");
  b = good;
  b[11][2] = -1;  // a negative gap
  refused(b, "/records/3/11/2");
  b = good;
  b[12] = json::array({1});  // not one per chunk
  refused(b, "/records/3/12");
  b = good;
  b[12][1] = 0;
  refused(b, "/records/3/12/1");
  b = good;
  b[13] = json::array({9});
  refused(b, "/records/3/13/0");
  // Times and chunk arrivals whose sums would overflow 64 bits, and a target's message too long.
  b = good;
  b[4] = std::numeric_limits<std::int64_t>::max();
  refused(b, "/records/3/4");
  b = good;
  b[11] = json::array({std::numeric_limits<std::int64_t>::max() / 2, std::numeric_limits<std::int64_t>::max() / 2});
  b[12] = json::array();
  b[13] = json::array();
  refused(b, "/records/3/11/1");
  b = good;
  b.push_back(std::string(201, 'x'));
  refused(b, "/records/3/14");
  b = good;
  b.push_back(3);
  refused(b, "/records/3/14");
  // The target's message crosses the wire with its record.
  RequestRecord failed = sample_record();
  failed.outcome = Outcome::stream_error;
  failed.error_message = "the request exceeds the available context size";
  CHECK(loadgen::decode_record(loadgen::encode_record(7, failed), "/r").value().rec.error_message ==
        failed.error_message);
}

TEST_CASE("agents: an answer of no generated tokens crosses the wire with the items it sent") {
  RequestRecord r;
  r.scheduled = r.dispatched = r.sent = 10ns;
  r.finished = 50ns;
  r.chunks = {{40ns, 0, false}};
  r.streamed = false;
  r.generated = false;
  r.inputs = 8;
  r.input_tokens = 2048;
  const json j = loadgen::encode_record(3, r);
  REQUIRE(j.size() == 16);
  CHECK(j[14] == "");
  CHECK(j[15] == 8);
  auto back = loadgen::decode_record(json::parse(j.dump()), "/records/0");
  REQUIRE(back.has_value());
  CHECK_FALSE(back->rec.generated);
  CHECK_FALSE(back->rec.streamed);
  CHECK(back->rec.inputs == 8);
  CHECK(back->rec.input_tokens == 2048);
  REQUIRE(back->rec.chunks.size() == 1);
  CHECK(back->rec.chunks[0].tokens == 0);
  CHECK(back->rec.chunks[0].arrival == 40ns);
  CHECK(back->rec.error_message.empty());
  const auto refused = [](json bad, const std::string& field) {
    auto b = loadgen::decode_record(bad, "/r");
    REQUIRE_FALSE(b.has_value());
    CHECK(b.error().field == field);
  };
  json bad = j;
  bad[15] = -1;
  refused(bad, "/r/15");
  bad = j;
  bad[15] = "8";
  refused(bad, "/r/15");
  bad = j;
  bad.push_back(70000);  // a model's index past 65535
  refused(bad, "/r/16");
  bad = j;
  for (int k = 0; k < 3; ++k) bad.push_back(1U);  // 19 elements: past the replica's
  refused(bad, "/r");
  bad = j;
  bad[10] = 2;  // a chunk of 0 tokens is only a tokenless answer's
  refused(bad, "/r/12/0");
  bad = j;
  bad[11] = json::array({40, 1});
  bad[12] = json::array({0, 0});
  refused(bad, "/r/11");  // a tokenless answer has one chunk
  // A failure's message and the items both cross.
  r.outcome = Outcome::stream_error;
  r.error_message = "the answer holds 7 results for 8 items sent";
  r.chunks.clear();
  auto failed = loadgen::decode_record(loadgen::encode_record(4, r), "/r");
  REQUIRE(failed.has_value());
  CHECK(failed->rec.error_message == r.error_message);
  CHECK(failed->rec.inputs == 8);
  // The model asked for crosses too; a record of the first model has no tail.
  RequestRecord adapter = sample_record();
  adapter.model = 2;
  const json a = loadgen::encode_record(5, adapter);
  REQUIRE(a.size() == 17);
  CHECK(a[15] == 0);
  CHECK(loadgen::decode_record(a, "/r").value().rec.model == 2);
  CHECK(loadgen::encode_record(5, sample_record()).size() == 14);
  // The replica it went to crosses last; out of its range, or not a number, it is refused.
  RequestRecord replica = sample_record();
  replica.replica = 3;
  json rj = loadgen::encode_record(6, replica);
  REQUIRE(rj.size() == 18);
  CHECK(rj[16] == 0);
  CHECK(loadgen::decode_record(rj, "/r").value().rec.replica == 3);
  rj[17] = 70000;
  refused(rj, "/r/17");
  rj[17] = "3";
  refused(rj, "/r/17");
  rj[17] = 3;
  rj.push_back(1);
  refused(rj, "/r");  // nothing past the replica
}

TEST_CASE("agents: the clock estimate keeps the smallest round trip") {
  // capsweepd's clock is 5 ms ahead. A slow exchange with an asymmetric path misleads; the
  // fast one is kept, and its error bound is half its round trip.
  const std::int64_t off = 5'000'000;
  std::vector<loadgen::ClockSample> s = {
      {0, 3'000'000 + off, 3'000'100 + off, 3'400'100},  // 3 ms out, 0.3 ms back
      {10'000'000, 10'000'100 + off, 10'000'200 + off, 10'000'300},
  };
  auto e = loadgen::estimate_clock(s);
  REQUIRE(e.has_value());
  CHECK(e->rtt_ns == 200);
  CHECK(e->offset_ns == off);
  CHECK(e->error_ns == 100);
  // The slow exchange alone: its offset is off by its asymmetry, within its bound.
  auto slow = loadgen::estimate_clock({s[0]});
  REQUIRE(slow.has_value());
  CHECK(std::abs(slow->offset_ns - off) <= slow->error_ns);
  CHECK(slow->offset_ns != off);
  CHECK(!loadgen::estimate_clock({}).has_value());
  CHECK(!loadgen::estimate_clock({{100, 0, 500, 200}}).has_value());  // a negative round trip: not an exchange
}

TEST_CASE("agents: registration refuses malformed ids and old epochs") {
  loadgen::AgentHub hub(quick());
  // A run nobody opened, and no job found for it: refused, and nothing is kept for it.
  CHECK(hub.register_agent(ids(0)).error().code == errc::not_found);
  CHECK(hub.status("sw-1").is_null());
  hub.open_run("sw-1", 1);
  CHECK(hub.register_agent({{"index", 0}, {"epoch", 1}}).error().field == "/run_id");
  CHECK(hub.register_agent({{"run_id", "sw-1"}, {"index", -1}, {"epoch", 1}}).error().field == "/index");
  CHECK(hub.register_agent({{"run_id", "sw-1"}, {"index", 5000}, {"epoch", 1}}).error().field == "/index");
  CHECK(hub.register_agent({{"run_id", "sw-1"}, {"index", 0}, {"epoch", "x"}}).error().field == "/epoch");
  CHECK(hub.poll(ids(0)).error().code == errc::not_found);  // register first
  REQUIRE(hub.register_agent(ids(0, 5)).has_value());
  auto old = hub.register_agent(ids(0, 4));
  REQUIRE(!old.has_value());
  CHECK(old.error().code == errc::conflict);
  CHECK(hub.poll(ids(0, 4)).error().code == errc::conflict);
  CHECK(hub.poll(ids(0, 6)).error().code == errc::not_found);  // a newer epoch registers first
  REQUIRE(hub.register_agent(ids(0, 6)).has_value());
  CHECK(hub.poll(ids(0, 5)).error().code == errc::conflict);  // the replaced agent is refused
  CHECK(hub.poll(ids(0, 6)).value()["state"] == "wait");
  CHECK(hub.register_agent(ids(1, 1)).value()["state"] == "done");  // the run needs one agent
  CHECK(hub.status("sw-1")["agents"].size() == 1);
  hub.close_run("sw-1");
  CHECK(hub.poll(ids(0, 6)).value()["state"] == "done");
  CHECK(hub.register_agent(ids(1, 1)).value()["state"] == "done");
}

TEST_CASE("agents: a run found by the caller waits for its agents, as many as its parts") {
  loadgen::AgentHub hub(quick());
  REQUIRE(hub.register_agent(ids(1), 2u).value()["state"] == "registered");
  CHECK(hub.register_agent(ids(2), 2u).value()["state"] == "done");
  CHECK(hub.status("sw-1")["parts"] == 2);
  CHECK(hub.status("sw-1")["agents"].size() == 1);
  // Runs waiting for their jobs are bounded: past 256 a new one is told to come back later.
  for (int i = 1; i < 256; ++i) {
    REQUIRE(hub.register_agent({{"run_id", fmt::format("sw-w{}", i)}, {"index", 0}, {"epoch", 1}}, 1u).has_value());
  }
  auto full = hub.register_agent({{"run_id", "sw-one-too-many"}, {"index", 0}, {"epoch", 1}}, 1u);
  REQUIRE(!full.has_value());
  CHECK(full.error().code == errc::unavailable);
  CHECK(hub.status("sw-one-too-many").is_null());
  hub.open_run("sw-1", 2);  // a job claimed: its run no longer waits, and room is made
  CHECK(hub.register_agent({{"run_id", "sw-one-too-many"}, {"index", 0}, {"epoch", 1}}, 1u).has_value());
}

TEST_CASE("agents: a step goes once every agent acknowledged its digest, and gathers their records") {
  loadgen::AgentHub hub(quick());
  hub.open_run("sw-1", 2);
  for (std::uint32_t i = 0; i < 2; ++i) REQUIRE(hub.register_agent(ids(i)).has_value());
  std::atomic<bool> went{false};
  auto step = std::async(std::launch::async, [&] {
    return hub.run_step(
        "sw-1", {{"what", "the step"}}, 0xabcULL, expect_times(3, 1'000'000ns), 200ms, [] { return false; },
        [&](SteadyClock::time_point) { went = true; });
  });
  json offer;
  for (int i = 0; i < 100 && (offer = hub.poll(ids(0)).value())["state"] != "step"; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(offer["state"] == "step");
  CHECK(offer["payload"]["what"] == "the step");
  CHECK(offer["parts"] == 2);
  CHECK(offer["part"] == 0);
  CHECK(offer["digest"] == "0000000000000abc");
  const auto seq = offer["step"].get<std::uint64_t>();
  const json clock = {{"offset_ms", 0.01}, {"error_ms", 0.05}};
  CHECK(hub.poll(with(ids(0), {{"clock", clock}, {"ready", {{"step", seq}, {"digest", "0000000000000abc"}}}}))
            .value()["state"] == "wait");
  std::this_thread::sleep_for(100ms);
  CHECK(!went);  // agent 1 has not acknowledged
  const json go =
      hub.poll(with(ids(1), {{"clock", clock}, {"ready", {{"step", seq}, {"digest", "0000000000000abc"}}}})).value();
  json g = go;
  for (int i = 0; i < 100 && g["state"] != "go"; ++i) {
    std::this_thread::sleep_for(10ms);
    g = hub.poll(ids(1)).value();
  }
  REQUIRE(g["state"] == "go");
  CHECK(g["t0_ns"].is_number_integer());
  // Records: agent 0 sends the even indices, agent 1 the odd ones.
  RequestRecord r = sample_record();
  r.outcome = Outcome::ok;
  r.turn = 0;  // not a session's: its index is its share
  CHECK(hub.heartbeat(with(ids(0), {{"step", seq}, {"sent", 1}, {"in_flight", 1}})).value()["state"] == "run");
  CHECK(hub.records(
               with(ids(0), {{"step", seq}, {"records", {loadgen::encode_record(0, r), loadgen::encode_record(2, r)}}}))
            .value()["received"] == 2);
  CHECK(hub.records(with(ids(0), {{"step", seq},
                                  {"records", json::array()},
                                  {"done", true},
                                  {"summary", {{"cpu_s", 0.5}, {"sent", 2}}}}))
            .value()["state"] == "run");
  CHECK(hub.records(with(ids(1), {{"step", seq}, {"records", {loadgen::encode_record(1, r)}}, {"done", true}}))
            .value()["state"] == "run");
  const loadgen::AgentsStep out = step.get();
  CHECK(went);
  CHECK(out.outcome.valid());
  CHECK(out.records.size() == 3);
  REQUIRE(out.outcome.agents.size() == 2);
  CHECK(out.outcome.agents[0].records == 2);
  CHECK(out.outcome.agents[0].cpu_s == 0.5);
  CHECK(out.outcome.agents[0].offset_error_ms == 0.05);
  CHECK(out.outcome.agents[1].records == 1);
  // A step over: a heartbeat of it is told to stop.
  CHECK(hub.heartbeat(with(ids(1), {{"step", seq}})).value()["state"] == "abort");
}

namespace {

// Runs a one-agent step and returns it, after `act` has done its part of the protocol.
template <class Act>
loadgen::AgentsStep one_agent_step(loadgen::AgentHub& hub, Act act,
                                   std::shared_ptr<const loadgen::StepExpectation> expect = expect_times(0)) {
  hub.open_run("sw-1", 1);
  REQUIRE(hub.register_agent(ids(0)).has_value());
  auto step = std::async(std::launch::async, [&] {
    return hub.run_step("sw-1", json::object(), 0xfeedULL, expect, 200ms, [] { return false; });
  });
  json offer;
  for (int i = 0; i < 100 && (offer = hub.poll(ids(0)).value())["state"] != "step"; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(offer["state"] == "step");
  act(offer["step"].get<std::uint64_t>());
  return step.get();
}

}  // namespace

TEST_CASE("agents: faults make the step invalid, naming the agent and why") {
  loadgen::AgentHub hub(quick());
  const json good_clock = {{"offset_ms", 0}, {"error_ms", 0.1}};
  SECTION("another schedule digest") {
    auto out = one_agent_step(hub, [&](std::uint64_t seq) {
      CHECK(hub.poll(with(ids(0), {{"clock", good_clock}, {"ready", {{"step", seq}, {"digest", "0000000000000bad"}}}}))
                .value()["state"] == "abort");
    });
    CHECK(!out.outcome.valid());
    CHECK(out.outcome.invalid_agent == 0u);
    CHECK(out.outcome.invalid.find("digest") != std::string::npos);
    CHECK(!out.t0);
  }
  SECTION("a clock known only within more than 1 ms") {
    auto out = one_agent_step(hub, [&](std::uint64_t seq) {
      hub.poll(with(ids(0), {{"clock", {{"offset_ms", 3}, {"error_ms", 1.5}}},
                             {"ready", {{"step", seq}, {"digest", "000000000000feed"}}}}));
    });
    CHECK(out.outcome.invalid.find("clock") != std::string::npos);
  }
  SECTION("an agent that cannot make the step") {
    auto out = one_agent_step(hub, [&](std::uint64_t seq) {
      hub.poll(with(ids(0), {{"ready", {{"step", seq}, {"error", "its dataset is broken"}}}}));
    });
    CHECK(out.outcome.invalid.find("its dataset is broken") != std::string::npos);
  }
  SECTION("an agent lost mid-step") {
    auto out = one_agent_step(hub, [&](std::uint64_t seq) {
      hub.poll(with(ids(0), {{"clock", good_clock}, {"ready", {{"step", seq}, {"digest", "000000000000feed"}}}}));
      // It got its go and then fell silent.
    });
    CHECK(out.t0);
    CHECK(out.outcome.invalid.find("lost") != std::string::npos);
    CHECK(out.outcome.invalid_agent == 0u);
  }
  SECTION("a late go") {
    auto out = one_agent_step(hub, [&](std::uint64_t seq) {
      hub.poll(with(ids(0), {{"clock", good_clock}, {"ready", {{"step", seq}, {"digest", "000000000000feed"}}}}));
      std::this_thread::sleep_for(100ms);
      CHECK(hub.heartbeat(with(ids(0), {{"step", seq}, {"late_go_ms", 12.5}})).value()["state"] == "abort");
    });
    CHECK(out.outcome.invalid.find("12.5 ms after t0") != std::string::npos);
  }
  SECTION("an agent replaced mid-step") {
    auto out = one_agent_step(hub, [&](std::uint64_t seq) {
      hub.poll(with(ids(0), {{"clock", good_clock}, {"ready", {{"step", seq}, {"digest", "000000000000feed"}}}}));
      std::this_thread::sleep_for(100ms);
      REQUIRE(hub.register_agent(ids(0, 2)).has_value());
    });
    CHECK(out.outcome.invalid.find("replaced mid-step (epoch 1 by 2)") != std::string::npos);
  }
  SECTION("an agent that never registers") {
    hub.open_run("sw-1", 2);
    REQUIRE(hub.register_agent(ids(0)).has_value());
    auto out = hub.run_step("sw-1", json::object(), 1, expect_times(0), 100ms, [] { return false; });
    CHECK(out.outcome.invalid.find("did not acknowledge") != std::string::npos);
    CHECK(out.outcome.invalid_agent == 0u);
  }
  SECTION("a malformed batch") {
    auto out = one_agent_step(hub, [&](std::uint64_t seq) {
      hub.open_run("sw-1", 1);
      hub.poll(with(ids(0), {{"clock", good_clock}, {"ready", {{"step", seq}, {"digest", "000000000000feed"}}}}));
      std::this_thread::sleep_for(100ms);
      // With one part every index is agent 0's: a malformed batch is refused instead.
      auto bad = hub.records(with(ids(0), {{"step", seq}, {"records", {json::array({1})}}}));
      REQUIRE(!bad.has_value());
      CHECK(bad.error().field == "/records/0");
      hub.records(with(ids(0), {{"step", seq}, {"records", json::array()}, {"done", true}}));
    });
    CHECK(out.outcome.valid());
  }
}

TEST_CASE("agents: a cancelled step tells its agents to stop") {
  loadgen::AgentHub hub(quick());
  hub.open_run("sw-1", 1);
  REQUIRE(hub.register_agent(ids(0)).has_value());
  std::atomic<bool> cancel{false};
  auto step = std::async(std::launch::async, [&] {
    return hub.run_step("sw-1", json::object(), 1, expect_times(0), 10s, [&] { return cancel.load(); });
  });
  std::this_thread::sleep_for(100ms);
  cancel = true;
  auto out = step.get();
  CHECK(out.cancelled);
  CHECK(hub.poll(ids(0)).value()["state"] == "abort");
}

TEST_CASE("agents: the spec's agents field") {
  const json base = {{"target", {{"base_url", "http://127.0.0.1:9"}, {"model", "m"}}},
                     {"slo", {{"ttft_ms", {{"p95", 500}}}}}};
  json j = base;
  j["agents"] = 4;
  auto s = sweep::parse_job_spec(j);
  REQUIRE(s.has_value());
  CHECK(s->agents == 4);
  CHECK(sweep::parse_job_spec(base)->agents == 0);
  for (const json& bad : {json(0), json(257), json(2.5), json("4")}) {
    j["agents"] = bad;
    auto r = sweep::parse_job_spec(j);
    REQUIRE(!r.has_value());
    CHECK(r.error().field == "/agents");
  }
}

TEST_CASE("agents: the Indexed Job is a pure function of its settings") {
  sweep::AgentJobSettings s;
  s.run_id = "sw-20261205-ABC_1";
  s.agents = 4;
  s.image = "registry.example/capsweep:0.2";
  s.server = "http://capsweepd.load.svc:8080";
  s.namespace_ = "load";
  const json job = sweep::agent_job(s);
  CHECK(job == sweep::agent_job(s));
  CHECK(job["kind"] == "Job");
  CHECK(job["metadata"]["name"] == "capsweep-agents-sw-20261205-abc-1");
  CHECK(job["metadata"]["namespace"] == "load");
  const json& spec = job["spec"];
  CHECK(spec["completionMode"] == "Indexed");
  CHECK(spec["completions"] == 4);
  CHECK(spec["parallelism"] == 4);
  CHECK(spec["maxFailedIndexes"] == 0);
  CHECK(spec["podReplacementPolicy"] == "Failed");
  CHECK(spec["backoffLimitPerIndex"] == 1);
  const json& pod = spec["template"]["spec"];
  CHECK(pod["restartPolicy"] == "Never");
  CHECK(pod["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname");
  CHECK(pod["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"]["capsweep.dev/run"] == "sw-20261205-abc-1");
  const json& c = pod["containers"][0];
  CHECK(c["image"] == "registry.example/capsweep:0.2");
  CHECK(c["args"] == json({"--server", "http://capsweepd.load.svc:8080", "--run", "sw-20261205-ABC_1"}));
  CHECK(c["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "capsweep-agent-token");
  s.agents = 2;
  CHECK(sweep::agent_job(s) != job);
  CHECK(sweep::agent_job_name(std::string(200, 'x')).size() <= 63);
}

TEST_CASE("agents: the Kubernetes API's place is resolved from a pod's environment, or refused naming the setting") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("capsweep-kube-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "namespace") << "loadtest\n";
  std::ofstream(dir / "bad-namespace") << "Load_Test";
  sweep::AgentJobApi api;
  api.apply = true;
  api.namespace_file = (dir / "namespace").string();
  api.image = "capsweep:0.2";
  api.server = "http://capsweepd:8080";

  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
  auto r = sweep::resolve_agent_job_api(api);
  REQUIRE(r.has_value());
  CHECK(r->api_server == "https://10.96.0.1:6443");
  CHECK(r->namespace_ == "loadtest");  // the file's, its newline trimmed
  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  CHECK(sweep::resolve_agent_job_api(api)->api_server == "https://[fd00::1]:443");
  // Given settings win over the pod's.
  api.api_server = "https://127.0.0.1:9443";
  api.namespace_ = "other";
  CHECK(sweep::resolve_agent_job_api(api)->api_server == "https://127.0.0.1:9443");
  CHECK(sweep::resolve_agent_job_api(api)->namespace_ == "other");

  api.api_server.clear();
  api.namespace_.clear();
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto outside = sweep::resolve_agent_job_api(api);
  REQUIRE_FALSE(outside.has_value());
  CHECK(outside.error().field == "/agents/kubernetes/api_server");
  CHECK(outside.error().message.find("KUBERNETES_SERVICE_HOST") != std::string::npos);
  api.api_server = "kubernetes:443";
  CHECK(sweep::resolve_agent_job_api(api).error().field == "/agents/kubernetes/api_server");
  api.api_server = "https://127.0.0.1:9443";
  api.namespace_file = (dir / "missing").string();
  CHECK(sweep::resolve_agent_job_api(api).error().field == "/agents/kubernetes/namespace");
  api.namespace_file = (dir / "bad-namespace").string();
  auto bad = sweep::resolve_agent_job_api(api);
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message.find("Load_Test") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("agents: the Job capsweepd applies is the one it prints, with its settings") {
  sweep::AgentJobApi api;
  api.namespace_ = "loadtest";
  api.image = "registry.example/capsweep:0.2";
  api.server = "http://capsweepd.loadtest.svc:8080";
  api.secret = "agents";
  api.backoff_per_index = 3;
  const json job = sweep::agent_job_for(api, "sw-1", 5);
  sweep::AgentJobSettings s;
  s.run_id = "sw-1";
  s.agents = 5;
  s.image = api.image;
  s.server = api.server;
  s.secret = "agents";
  s.namespace_ = "loadtest";
  s.backoff_per_index = 3;
  CHECK(job == sweep::agent_job(s));
  CHECK(job["spec"]["backoffLimitPerIndex"] == 3);
  CHECK(job["metadata"]["namespace"] == "loadtest");
}

namespace {

// A record of request `index` of a step scheduled at `at`: sent 1 ms later, two tokens, ended.
loadgen::IndexedRecord evidence(std::uint64_t index, Nanos at = 0ns, std::uint16_t turn = 0) {
  loadgen::IndexedRecord r;
  r.index = index;
  r.rec.scheduled = r.rec.dispatched = at;
  r.rec.sent = at + 1ms;
  r.rec.chunks = {{at + 20ms, 1, false}, {at + 30ms, 1, false}};
  r.rec.finished = at + 31ms;
  r.rec.output_tokens = 2;
  r.rec.turn = turn;
  return r;
}

// Offers a taken batch to `ledger`: "" or why it was refused; `kept` gets what was kept.
std::string offer(loadgen::ShareLedger& ledger, std::vector<loadgen::IndexedRecord> batch,
                  std::vector<loadgen::IndexedRecord>& kept) {
  return ledger.take(batch, kept);
}

}  // namespace

TEST_CASE("agents: a record is taken once, for an index of the agent's own share of the schedule") {
  const auto expect = expect_times(6, 5ms);
  loadgen::ShareLedger ledger(expect.get(), 1, 2);  // agent 1 of 2: requests 1, 3, 5
  std::vector<loadgen::IndexedRecord> kept;
  REQUIRE(offer(ledger, {evidence(1, 5ms), evidence(3, 5ms)}, kept).empty());
  CHECK(kept.size() == 2);
  // The same batch again (an agent's retry) changes nothing.
  REQUIRE(offer(ledger, {evidence(1, 5ms), evidence(3, 5ms)}, kept).empty());
  CHECK(kept.size() == 2);
  CHECK(ledger.records() == 2);
  CHECK(ledger.complete().find("2 of its 3 requests") != std::string::npos);
  REQUIRE(offer(ledger, {evidence(5, 5ms)}, kept).empty());
  CHECK(ledger.complete().empty());

  SECTION("another record for an index already taken") {
    auto other = evidence(3, 5ms);
    other.rec.output_tokens = 3;
    CHECK(offer(ledger, {other}, kept).find("request 3 twice, with different records") != std::string::npos);
  }
  SECTION("twice in one batch, differently") {
    loadgen::ShareLedger fresh(expect.get(), 1, 2);
    auto other = evidence(1, 5ms);
    other.rec.finished += 1ms;
    std::vector<loadgen::IndexedRecord> none;
    CHECK(!offer(fresh, {evidence(1, 5ms), other}, none).empty());
    CHECK(none.empty());
  }
  SECTION("another agent's index, or one not in the schedule: nothing of the batch is kept") {
    loadgen::ShareLedger fresh(expect.get(), 1, 2);
    std::vector<loadgen::IndexedRecord> none;
    CHECK(offer(fresh, {evidence(1, 5ms), evidence(2, 5ms)}, none).find("another agent's") != std::string::npos);
    CHECK(offer(fresh, {evidence(999999, 5ms)}, none).find("not in the step's schedule of 6") != std::string::npos);
    CHECK(offer(fresh, {evidence((std::uint64_t{1} << 40) + 1, 5ms)}, none).find("not in the step's schedule") !=
          std::string::npos);
    CHECK(none.empty());
    CHECK(fresh.records() == 0);
  }
}

TEST_CASE("agents: a record's model and replica must be the target's") {
  auto expect = std::make_shared<loadgen::StepExpectation>(*expect_times(4, 5ms));
  expect->models = 2;
  expect->replicas = 3;
  loadgen::ShareLedger ledger(expect.get(), 0, 1);
  std::vector<loadgen::IndexedRecord> kept;
  auto fine = evidence(0, 5ms);
  fine.rec.model = 1;
  fine.rec.replica = 2;
  REQUIRE(offer(ledger, {fine}, kept).empty());
  auto stray = evidence(1, 5ms);
  stray.rec.replica = 3;
  CHECK(offer(ledger, {stray}, kept).find("the target has 2 model(s), 3 replica(s)") != std::string::npos);
  auto foreign = evidence(2, 5ms);
  foreign.rec.model = 2;
  CHECK(!offer(ledger, {foreign}, kept).empty());
  CHECK(kept.size() == 1);
}

TEST_CASE("agents: a record's instants must be ordered and its schedule the step's") {
  const auto expect = expect_times(2, 100ms);
  loadgen::ShareLedger ledger(expect.get(), 0, 1);
  std::vector<loadgen::IndexedRecord> kept;
  auto early = evidence(0, 100ms);
  early.rec.chunks.front().arrival = 100ms - 5s;  // a first token 5 s before its schedule
  CHECK(offer(ledger, {early}, kept).find("a first token before it was sent") != std::string::npos);
  auto backwards = evidence(0, 100ms);
  backwards.rec.finished = backwards.rec.chunks.front().arrival - 1ms;  // the end before the last token
  CHECK(offer(ledger, {backwards}, kept).find("an end before its last token") != std::string::npos);
  auto unsent = evidence(0, 100ms);
  unsent.rec.sent = unsent.rec.dispatched - 2ms;  // beyond the 1-ms clock bound
  CHECK(offer(ledger, {unsent}, kept).find("a send before its dispatch") != std::string::npos);
  auto elsewhen = evidence(0, 90ms);
  CHECK(offer(ledger, {elsewhen}, kept).find("where the step's schedule has 100.000 ms") != std::string::npos);
  auto within = evidence(1, 100ms);
  within.rec.sent = within.rec.dispatched - 500us;  // within the clock bound
  CHECK(offer(ledger, {within}, kept).empty());
  CHECK(kept.size() == 1);
}

TEST_CASE("agents: turns only where the job has sessions, within its turns") {
  std::vector<loadgen::IndexedRecord> kept;
  const auto plain = expect_times(4);
  loadgen::ShareLedger no_sessions(plain.get(), 0, 1);
  CHECK(offer(no_sessions, {evidence(0, 0ns, 300)}, kept).find("this step has no sessions") != std::string::npos);
  const auto sessions = expect_times(4, 0ns, 5);
  loadgen::ShareLedger ledger(sessions.get(), 0, 2);  // sessions 0 and 2
  CHECK(offer(ledger, {evidence(2 * 64 + 6, 0ns, 7)}, kept).find("turns are 1 to 5") != std::string::npos);
  CHECK(offer(ledger, {evidence(2 * 64 + 3, 0ns, 2)}, kept).find("each at its own index") != std::string::npos);
  CHECK(offer(ledger, {evidence(1 * 64, 0ns, 1)}, kept).find("another agent's") != std::string::npos);
  auto later = evidence(2 * 64 + 1, 0ns, 2);
  later.rec.scheduled = later.rec.dispatched = 40ms;  // a later turn is due after the answer before it
  later.rec.sent = 41ms;
  later.rec.chunks = {{50ms, 1, false}};
  later.rec.finished = 51ms;
  REQUIRE(offer(ledger, {evidence(0, 0ns, 1), evidence(2 * 64, 0ns, 1), later}, kept).empty());
  CHECK(ledger.complete().empty());  // both sessions began
}

TEST_CASE("agents: a closed loop's share is whole when no request below its last is missing") {
  loadgen::StepExpectation e;
  e.closed_loop = true;
  loadgen::ShareLedger ledger(&e, 1, 3);  // requests 1, 4, 7, ...
  std::vector<loadgen::IndexedRecord> kept;
  CHECK(ledger.complete().empty());
  REQUIRE(offer(ledger, {evidence(1), evidence(7)}, kept).empty());
  CHECK(ledger.complete().find("2 of its 3") != std::string::npos);
  REQUIRE(offer(ledger, {evidence(4)}, kept).empty());
  CHECK(ledger.complete().empty());
}

TEST_CASE("agents: an agent's summary crosses the wire by one pair, and a malformed one is refused") {
  loadgen::ShareSummary s;
  s.lag_p99_ms = 0.25;
  s.cpu_s = 1.5;
  s.loop_delay_p99_ms = 0.1;
  s.loop_delay_max_ms = 2;
  s.peak_connections = 12;
  s.sent = 340;
  s.sessions = loadgen::ShareSummary::Sessions{10, 7, 2, 1, 41};
  const auto back = loadgen::decode_summary(loadgen::encode_summary(s), "/summary");
  REQUIRE(back.has_value());
  CHECK(back->lag_p99_ms == 0.25);
  CHECK(back->cpu_s == 1.5);
  CHECK(back->loop_delay_max_ms == 2);
  CHECK(back->peak_connections == 12);
  CHECK(back->sent == 340);
  REQUIRE(back->sessions);
  CHECK(back->sessions->turns_sent == 41);
  CHECK(back->sessions->cut == 2);
  CHECK(loadgen::decode_summary(json::object(), "/summary").has_value());  // an agent whose step could not run
  CHECK(loadgen::decode_summary(json::array(), "/summary").error().field == "/summary");
  CHECK(loadgen::decode_summary({{"cpu_s", -1}}, "/summary").error().field == "/summary/cpu_s");
  CHECK(loadgen::decode_summary({{"sent", 1.5}}, "/summary").error().field == "/summary/sent");
  CHECK(loadgen::decode_summary({{"sessions", {{"cut", "x"}}}}, "/summary").error().field == "/summary/sessions/cut");
  CHECK(loadgen::decode_summary({{"nested", json::array({json::array()})}}, "/summary").error().field == "/summary");
}

TEST_CASE("agents: a batch is checked whole before anything of it is kept") {
  loadgen::AgentHub hub(quick());
  const json good_clock = {{"offset_ms", 0}, {"error_ms", 0.1}};
  const auto rec = [](std::uint64_t i) { return loadgen::encode_record(i, evidence(i).rec); };
  SECTION("a malformed done is refused, and its records are not kept twice by the retry") {
    auto out = one_agent_step(
        hub,
        [&](std::uint64_t seq) {
          hub.poll(with(ids(0), {{"clock", good_clock}, {"ready", {{"step", seq}, {"digest", "000000000000feed"}}}}));
          std::this_thread::sleep_for(100ms);
          auto bad = hub.records(with(ids(0), {{"step", seq}, {"records", {rec(0), rec(1)}}, {"done", "yes"}}));
          REQUIRE(!bad.has_value());
          CHECK(bad.error().field == "/done");
          CHECK(hub.records(with(ids(0), {{"step", seq}, {"records", {rec(0), rec(1)}}})).value()["state"] == "run");
          CHECK(hub.records(with(ids(0), {{"step", seq}, {"records", {rec(0), rec(1)}}})).value()["state"] == "run");
          CHECK(hub.records(with(ids(0), {{"step", seq}, {"records", {rec(2)}}, {"done", true}})).value()["state"] ==
                "run");
        },
        expect_times(3));
    CHECK(out.outcome.valid());
    CHECK(out.records.size() == 3);
    CHECK(out.outcome.agents[0].records == 3);
  }
  SECTION("done with fewer records than the share makes the step invalid") {
    auto out = one_agent_step(
        hub,
        [&](std::uint64_t seq) {
          hub.poll(with(ids(0), {{"clock", good_clock}, {"ready", {{"step", seq}, {"digest", "000000000000feed"}}}}));
          std::this_thread::sleep_for(100ms);
          CHECK(hub.records(with(ids(0), {{"step", seq}, {"records", {rec(0)}}, {"done", true}})).value()["state"] ==
                "abort");
        },
        expect_times(3));
    CHECK(!out.outcome.valid());
    CHECK(out.outcome.invalid_agent == 0u);
    CHECK(out.outcome.invalid.find("1 of its 3 requests") != std::string::npos);
  }
  SECTION("a record with another record already taken for its index makes the step invalid") {
    auto out = one_agent_step(
        hub,
        [&](std::uint64_t seq) {
          hub.poll(with(ids(0), {{"clock", good_clock}, {"ready", {{"step", seq}, {"digest", "000000000000feed"}}}}));
          std::this_thread::sleep_for(100ms);
          hub.records(with(ids(0), {{"step", seq}, {"records", {rec(0)}}}));
          auto changed = evidence(0);
          changed.rec.outcome = Outcome::http_5xx;
          hub.records(with(ids(0), {{"step", seq}, {"records", {loadgen::encode_record(0, changed.rec)}}}));
        },
        expect_times(3));
    CHECK(out.outcome.invalid.find("request 0 twice") != std::string::npos);
    CHECK(out.records.size() == 1);
  }
}

TEST_CASE("agents: Kubernetes names are RFC 1123 names, or the manifest is refused naming the field") {
  CHECK(sweep::rfc1123_label("loadtest-1"));
  CHECK(!sweep::rfc1123_label("Load_Test"));
  CHECK(!sweep::rfc1123_label("-a"));
  CHECK(!sweep::rfc1123_label(std::string(64, 'a')));
  CHECK(sweep::rfc1123_subdomain("capsweep.agent-token"));
  CHECK(!sweep::rfc1123_subdomain("capsweep..token"));
  CHECK(!sweep::rfc1123_subdomain("token/../x"));
  CHECK(sweep::secret_key_name("token_v2.txt"));
  CHECK(!sweep::secret_key_name("a b"));
  sweep::AgentJobSettings s;
  CHECK(!sweep::agent_job_names_error(s));
  s.namespace_ = "Bad Namespace";
  CHECK(sweep::agent_job_names_error(s)->field == "/namespace");
  s.namespace_ = "ok";
  s.secret = "UPPER";
  CHECK(sweep::agent_job_names_error(s)->field == "/secret");
  s.secret = "fine";
  s.secret_key = "";
  CHECK(sweep::agent_job_names_error(s)->field == "/secret_key");
}

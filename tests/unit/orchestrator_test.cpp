#include "sweep/orchestrator.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "sweep/kinds.hpp"

using namespace capsweep;
using namespace capsweep::sweep;
using json = nlohmann::json;

namespace {

JobSpec sweep_spec(int steps = 4) {
  JobSpec s;
  s.kind = JobKind::sweep;
  s.base_url = "http://127.0.0.1:8000";
  s.sweep.steps = steps;
  s.sweep.step_duration = std::chrono::seconds(30);
  s.sweep.warmup = std::chrono::seconds(5);
  s.sweep.max_rate_rps = 100;
  return s;
}

StepOutcome baseline(double r_sync, std::uint64_t completed = 10) {
  StepOutcome o;
  o.kind = StepKind::baseline;
  o.verdict = Verdict::pass;
  o.measured_rate_rps = r_sync;
  o.completed = completed;
  o.measured = 10;
  o.summary = {{"completed", completed}, {"p95_ttft_ms", 20.0}};
  return o;
}

StepOutcome probe(double r_max, std::uint64_t completed = 200) {
  StepOutcome o;
  o.kind = StepKind::probe;
  o.verdict = Verdict::fail;
  o.measured_rate_rps = r_max;
  o.completed = completed;
  o.measured = 200;
  return o;
}

// A fabricated server: latency flat up to `capacity`, steep above; verdicts from a function.
using VerdictFn = std::function<Verdict(double rate, bool rerun)>;

StepOutcome fixed_step(const StepOrder& order, const VerdictFn& verdict, double capacity) {
  StepOutcome o;
  o.kind = order.kind;
  o.offered_rate_rps = order.rate_rps;
  o.rerun = order.rerun;
  o.verdict = verdict(order.rate_rps, order.rerun);
  o.saturated = order.rate_rps > capacity;
  o.completion_ratio = order.rate_rps > capacity ? capacity / order.rate_rps : 1.0;
  o.measured_rate_rps = std::min(order.rate_rps, capacity);
  o.completed = 300;
  o.measured = 300;
  o.limiting_metric = o.verdict == Verdict::pass ? "p95_itl_ms" : "p95_ttft_ms";
  o.mean_e2el_ms = 500;
  o.server_in_system = order.rate_rps * 0.5;
  o.summary = {{"p95_ttft_ms", 40 + 2 * order.rate_rps + 300 * std::max(0.0, order.rate_rps - capacity)},
               {"mean_e2el_ms", 500.0}};
  return o;
}

struct Run {
  std::vector<StepOutcome> steps;
  std::vector<StepOrder> orders;
  Action last;
};

Run simulate(const JobSpec& spec, double r_sync, double r_max, const VerdictFn& verdict, double capacity) {
  Run run;
  run.steps = {baseline(r_sync), probe(r_max)};
  for (int guard = 0; guard < 200; ++guard) {
    run.last = next_action(spec, run.steps);
    const auto* order = std::get_if<StepOrder>(&run.last);
    if (!order) return run;
    run.orders.push_back(*order);
    run.steps.push_back(fixed_step(*order, verdict, capacity));
  }
  FAIL("the orchestrator did not finish in 200 steps");
  return run;
}

VerdictFn threshold(double t) {
  return [t](double rate, bool) { return rate <= t ? Verdict::pass : Verdict::fail; };
}

const json& result_of(const Action& a) {
  REQUIRE(std::holds_alternative<Finish>(a));
  return std::get<Finish>(a).result;
}

}  // namespace

TEST_CASE("orchestrator: baseline first, then the probe, then the ladder") {
  const JobSpec spec = sweep_spec();
  auto a = next_action(spec, {});
  REQUIRE(std::holds_alternative<StepOrder>(a));
  CHECK(std::get<StepOrder>(a).kind == StepKind::baseline);
  CHECK(std::get<StepOrder>(a).concurrency == 1);
  CHECK(std::get<StepOrder>(a).requests == spec.sweep.baseline_requests);

  a = next_action(spec, {baseline(2)});
  REQUIRE(std::holds_alternative<StepOrder>(a));
  CHECK(std::get<StepOrder>(a).kind == StepKind::probe);
  CHECK(std::get<StepOrder>(a).requests == spec.sweep.probe_requests);

  a = next_action(spec, {baseline(2), probe(30)});
  REQUIRE(std::holds_alternative<StepOrder>(a));
  const auto& o = std::get<StepOrder>(a);
  CHECK(o.kind == StepKind::ladder);
  CHECK(o.rate_rps == Approx(9));  // 2 + 28 * 1/4: K-1 inner rates, then r_max itself
  CHECK(o.duration == spec.sweep.step_duration);
  CHECK(o.warmup == spec.sweep.warmup);
  // Pure: asking again from the same stored steps gives the same answer (recovery).
  CHECK(std::get<StepOrder>(next_action(spec, {baseline(2), probe(30)})).rate_rps == Approx(o.rate_rps));
}

TEST_CASE("orchestrator: a monotone server converges on its threshold within the tolerance") {
  const JobSpec spec = sweep_spec();
  const double t = 23.3;
  const Run run = simulate(spec, 2, 30, threshold(t), t);
  const json& r = result_of(run.last);
  const double max = r["max_slo_rate_rps"].get<double>();
  const double fail = r["slo_bracket_rps"][1].get<double>();
  CHECK(max <= t);
  CHECK(fail > t);
  CHECK((fail - max) / max <= spec.sweep.tolerance);
  CHECK(r["slo_bracket_rps"][0].get<double>() == max);
  CHECK(r["limiting_metric"] == "p95_ttft_ms");
  CHECK(r["saturation_rate_rps"].get<double>() == Approx(fail));
  // The knee of the fabricated latency (flat, then steep at the capacity).
  REQUIRE(r["knee_rate_rps"].is_number());
  CHECK(r["knee_rate_rps"].get<double>() == Approx(t).epsilon(0.15));
  CHECK(r["concurrency_at_max_slo"]["littles_law"].get<double>() == Approx(max * 0.5));
  CHECK(r["concurrency_at_max_slo"]["server_running_waiting"].get<double>() == Approx(max * 0.5));
  CHECK(r["baseline"]["rate_rps"] == 2.0);
  CHECK(r["probe"]["rate_rps"] == 30.0);
  CHECK(r["probe"]["arrival"] == "all_at_once");  // the probe is MLPerf's Offline, and says so
  CHECK(r["probe"]["mlperf_scenario"] == "Offline");
  CHECK(r["mlperf_scenario"].is_null());  // no latency bound: not MLPerf's Server scenario
  CHECK(r["warnings"].empty());
  CHECK(r["steps_run"] == run.steps.size());
}

TEST_CASE("orchestrator: when every ladder rate passes it escalates until a rate fails or the cap") {
  const JobSpec spec = sweep_spec();
  const Run run = simulate(spec, 2, 30, threshold(45), 45);
  const json& r = result_of(run.last);
  bool escalated = false;
  for (const auto& o : run.orders) escalated |= o.phase == "escalate";
  CHECK(escalated);
  CHECK(r["max_slo_rate_rps"].get<double>() <= 45);
  CHECK(r["slo_bracket_rps"][1].get<double>() > 45);

  const Run capped = simulate(spec, 2, 30, threshold(1000), 1000);
  const json& c = result_of(capped.last);
  CHECK(c["max_slo_rate_rps"].get<double>() == Approx(100));  // sweep.max_rate_rps
  CHECK(c["slo_bracket_rps"][1].is_null());
  REQUIRE(c["warnings"].size() == 1);
  for (const auto& o : capped.orders) CHECK(o.rate_rps <= 100);
}

TEST_CASE("orchestrator: when every rate fails it halves down, then answers with no rate") {
  const JobSpec spec = sweep_spec();
  const Run run = simulate(spec, 2, 30, threshold(0), 0.01);
  const json& r = result_of(run.last);
  CHECK(r["max_slo_rate_rps"].is_null());
  CHECK(r["slo_bracket_rps"][0].is_null());
  CHECK(r["concurrency_at_max_slo"].is_null());
  // Two ladder failures stop the ladder; the rest halve down to a floor of r_sync / 8.
  int ladder = 0;
  for (const auto& o : run.orders) ladder += o.phase == "ladder";
  CHECK(ladder == spec.sweep.stop_after_failures);
  CHECK(run.orders.back().rate_rps >= 2.0 / 8);
  CHECK_FALSE(r["warnings"].empty());
}

TEST_CASE("orchestrator: non-monotone results give the highest rate with no failure below it") {
  const JobSpec spec = sweep_spec();
  // Fails in [9, 12] only (a noisy dip), and above 25.
  auto dip = [](double rate, bool) { return (rate >= 9 && rate <= 12) || rate > 25 ? Verdict::fail : Verdict::pass; };
  const Run run = simulate(spec, 2, 30, dip, 25);
  const json& r = result_of(run.last);
  CHECK(r["max_slo_rate_rps"].get<double>() < 9);
  CHECK(r["slo_bracket_rps"][1].get<double>() == Approx(9));
  bool warned = false;
  for (const auto& w : r["warnings"]) warned |= w.get<std::string>().find("non-monotone") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("orchestrator: a baseline or probe with no success fails the sweep") {
  const JobSpec spec = sweep_spec();
  auto a = next_action(spec, {baseline(0, 0)});
  REQUIRE(std::holds_alternative<Fail>(a));
  CHECK(std::get<Fail>(a).reason.find("baseline") != std::string::npos);
  auto b = next_action(spec, {baseline(2), probe(0, 0)});
  REQUIRE(std::holds_alternative<Fail>(b));
  CHECK(std::get<Fail>(b).reason.find("probe") != std::string::npos);
}

TEST_CASE("orchestrator: a probe no faster than the baseline widens the ladder around it") {
  const auto range = ladder_range(5, 4);
  CHECK(range.probe_not_faster);
  CHECK(range.lo == Approx(2.5));
  CHECK(range.hi == Approx(7.5));
  const Run run = simulate(sweep_spec(), 5, 4, threshold(6), 6);
  const json& r = result_of(run.last);
  CHECK(r["max_slo_rate_rps"].get<double>() <= 6);
  CHECK(r["max_slo_rate_rps"].get<double>() >= 6 / 1.05 - 1e-9);
  bool warned = false;
  for (const auto& w : r["warnings"]) warned |= w.get<std::string>().find("probe") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("orchestrator: an inconclusive step is re-run once, twice as long, before it counts") {
  const JobSpec spec = sweep_spec();
  // The first attempt at every rate is inconclusive; the re-run decides.
  auto unsure = [](double rate, bool rerun) {
    return !rerun ? Verdict::inconclusive : rate <= 20 ? Verdict::pass : Verdict::fail;
  };
  const Run run = simulate(spec, 2, 30, unsure, 20);
  REQUIRE(run.orders.size() >= 2);
  CHECK(run.orders[1].rerun);
  CHECK(run.orders[1].rate_rps == run.orders[0].rate_rps);
  CHECK(run.orders[1].duration == 2 * spec.sweep.step_duration);
  const json& r = result_of(run.last);
  CHECK(r["max_slo_rate_rps"].get<double>() <= 20);
  CHECK(r["max_slo_rate_rps"].get<double>() >= 20 / 1.05 - 1e-9);

  // Inconclusive twice (a generator-limited step stays so) counts as failing, with a warning.
  auto never_sure = [](double rate, bool) { return rate <= 5 ? Verdict::pass : Verdict::inconclusive; };
  const Run stuck = simulate(spec, 2, 30, never_sure, 5);
  const json& s = result_of(stuck.last);
  CHECK(s["max_slo_rate_rps"].get<double>() <= 5);
  bool warned = false;
  for (const auto& w : s["warnings"]) warned |= w.get<std::string>().find("re-run") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("orchestrator: generator-limited steps never pass and are reported") {
  const JobSpec spec = sweep_spec();
  std::vector<StepOutcome> steps{baseline(2), probe(30)};
  StepOrder o = std::get<StepOrder>(next_action(spec, steps));
  StepOutcome limited = fixed_step(o, threshold(100), 100);
  limited.verdict = Verdict::inconclusive;  // what evaluate_slo says of a generator-limited step
  limited.generator_limited = true;
  steps.push_back(limited);
  StepOrder again = std::get<StepOrder>(next_action(spec, steps));
  CHECK(again.rerun);
  limited.rerun = true;
  steps.push_back(limited);
  // Counted as failing: the ladder goes on, and the answer will carry the warning.
  auto third = std::get<StepOrder>(next_action(spec, steps));
  CHECK_FALSE(third.rerun);
  for (int i = 0; i < 40; ++i) {
    auto a = next_action(spec, steps);
    if (!std::holds_alternative<StepOrder>(a)) {
      const json& r = result_of(a);
      bool warned = false;
      for (const auto& w : r["warnings"]) warned |= w.get<std::string>().find("generator-limited") != std::string::npos;
      CHECK(warned);
      CHECK((r["max_slo_rate_rps"].is_null() || r["max_slo_rate_rps"].get<double>() < o.rate_rps));
      return;
    }
    steps.push_back(fixed_step(std::get<StepOrder>(a), threshold(100), 100));
  }
  FAIL("no answer");
}

TEST_CASE("orchestrator: max_steps bounds the fixed-rate steps") {
  JobSpec spec = sweep_spec();
  spec.sweep.max_steps = 3;
  const Run run = simulate(spec, 2, 30, threshold(23.3), 23.3);
  CHECK(run.orders.size() == 3);
  const json& r = result_of(run.last);
  CHECK(r["warnings"].size() == 1);
  CHECK(r["max_slo_rate_rps"].get<double>() <= 23.3);
}

TEST_CASE("orchestrator: progress names the phase and plans at least one more step") {
  const JobSpec spec = sweep_spec();
  auto p = plan_progress(spec, {});
  CHECK(p.phase == "baseline");
  CHECK(p.steps_planned >= 2 + spec.sweep.steps);
  p = plan_progress(spec, {baseline(2), probe(30)});
  CHECK(p.phase == "ladder");
  CHECK(p.steps_planned > 2);
  const Run run = simulate(spec, 2, 30, threshold(23.3), 23.3);
  p = plan_progress(spec, run.steps);
  CHECK(p.phase == "done");
  CHECK(p.steps_planned == static_cast<int>(run.steps.size()));
}

TEST_CASE("orchestrator: a check job runs one step and records the five parts of the criterion") {
  JobSpec spec;
  spec.kind = JobKind::check;
  spec.base_url = "http://127.0.0.1:8000";
  spec.target.model = "sim-8b";
  spec.check.rate_rps = 10;
  spec.check.duration = std::chrono::seconds(600);
  spec.check.warmup = std::chrono::seconds(120);
  spec.check.max_concurrency = 64;
  spec.basis = "contract 42";
  auto a = next_action(spec, {});
  REQUIRE(std::holds_alternative<StepOrder>(a));
  const auto& o = std::get<StepOrder>(a);
  CHECK(o.kind == StepKind::check);
  CHECK(o.rate_rps == 10);
  CHECK(o.duration == std::chrono::seconds(600));
  CHECK(o.warmup == std::chrono::seconds(120));
  CHECK(o.concurrency == 64);

  StepOutcome s;
  s.kind = StepKind::check;
  s.verdict = Verdict::fail;
  s.limiting_metric = "p95_ttft_ms";
  s.summary = {{"p95_ttft_ms", 900.0}};
  s.evaluation = {{"criteria", json::array({{{"name", "p95_ttft_ms"}, {"verdict", "fail"}}})}};
  const Action done = next_action(spec, {s});
  const json& r = result_of(done);
  CHECK(r["verdict"] == "fail");
  CHECK(r["target"]["base_url"] == "http://127.0.0.1:8000");
  CHECK(r["conditions"]["rate_rps"] == 10.0);
  CHECK(r["conditions"]["warmup_s"] == 120.0);
  CHECK(r["observations"]["p95_ttft_ms"] == 900.0);
  CHECK(r["criteria"][0]["name"] == "p95_ttft_ms");
  CHECK(r["basis"] == "contract 42");
  // MLPerf's names: Poisson arrivals against latency bounds are its Server scenario; all at
  // once its Offline scenario, with the warning that it is batch capacity.
  CHECK(r["mlperf_scenario"].is_null());  // no latency bound in this spec
  spec.slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  const json server = result_of(next_action(spec, {s}));
  CHECK(server["mlperf_scenario"] == "Server");
  CHECK(server["warnings"].empty());
  spec.arrival.process = ArrivalProcess::constant;
  CHECK(result_of(next_action(spec, {s}))["mlperf_scenario"].is_null());
  spec.arrival.process = ArrivalProcess::all_at_once;
  spec.check.rate_rps = std::numeric_limits<double>::infinity();
  spec.check.requests = 500;
  const json offline = result_of(next_action(spec, {s}));
  CHECK(offline["mlperf_scenario"] == "Offline");
  REQUIRE(offline["warnings"].size() == 1);
  CHECK(offline["warnings"][0].get<std::string>().find("batch capacity") != std::string::npos);
}

TEST_CASE("orchestrator: step outcomes round-trip through their stored JSON") {
  StepOutcome o;
  o.kind = StepKind::refine;
  o.offered_rate_rps = 12.5;
  o.verdict = Verdict::pass;
  o.rerun = true;
  o.saturated = true;
  o.limiting_metric = "p95_ttft_ms";
  o.limiting_value = std::numeric_limits<double>::infinity();
  o.server_in_system = 7;
  const auto back = StepOutcome::from_json(o.to_json()).value();
  CHECK(back.kind == StepKind::refine);
  CHECK(back.offered_rate_rps == 12.5);
  CHECK(back.verdict == Verdict::pass);
  CHECK(back.rerun);
  CHECK(back.saturated);
  CHECK(std::isinf(back.limiting_value));
  CHECK(back.server_in_system == 7);
  CHECK_FALSE(StepOutcome::from_json(json{{"kind", "bogus"}}).has_value());
  CHECK_FALSE(StepOutcome::from_json(json::array()).has_value());
}

TEST_CASE("orchestrator: an all_at_once step's infinite rate survives the stored text") {
  StepOutcome o;
  o.kind = StepKind::check;
  o.offered_rate_rps = std::numeric_limits<double>::infinity();
  o.verdict = Verdict::pass;
  // Through text, as the store keeps it: JSON has no infinity.
  const json stored = json::parse(o.to_json().dump());
  const auto back = StepOutcome::from_json(stored);
  REQUIRE(back.has_value());
  CHECK(std::isinf(back->offered_rate_rps));
  // Rows written before the fix held null there: they read back too.
  json old = stored;
  old["offered_rate_rps"] = nullptr;
  REQUIRE(StepOutcome::from_json(old).has_value());
  CHECK(std::isinf(StepOutcome::from_json(old)->offered_rate_rps));
}

namespace {

JobSpec spec_with_p95(int steps = 4) {
  JobSpec s = sweep_spec(steps);
  s.slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  s.slo.max_error_rate = 0.001;
  return s;
}

// Runs a sweep against fabricated steps; `outage(rate, rerun)` says which steps the target's
// unavailability hit (they fail on errors, and look saturated).
Run simulate_outage(const JobSpec& spec, const VerdictFn& verdict, double capacity,
                    const std::function<bool(double, bool)>& outage) {
  Run run;
  run.steps = {baseline(2), probe(30)};
  for (int guard = 0; guard < 200; ++guard) {
    run.last = next_action(spec, run.steps);
    const auto* order = std::get_if<StepOrder>(&run.last);
    if (!order) return run;
    run.orders.push_back(*order);
    StepOutcome o = fixed_step(*order, verdict, capacity);
    if (outage(order->rate_rps, order->rerun)) {
      o.verdict = Verdict::fail;
      o.unavailable = true;
      o.saturated = false;  // the judge never calls an outage saturation
      o.limiting_metric = "error_rate";
      o.summary["outage"] = {{"errors", {{"connect", 16}}}, {"first_error_s", 1.5}, {"last_error_s", 5.5}};
    }
    run.steps.push_back(o);
  }
  FAIL("the orchestrator did not finish in 200 steps");
  return run;
}

}  // namespace

TEST_CASE("orchestrator: a step hit by an outage is re-run, and the re-run decides") {
  const JobSpec spec = sweep_spec();
  const double t = 23.3;
  // The target is down during the first ladder step (9 req/s) only.
  const Run run =
      simulate_outage(spec, threshold(t), t, [](double rate, bool rerun) { return rate == Approx(9) && !rerun; });
  REQUIRE(run.orders.size() >= 2);
  CHECK(run.orders[1].rerun);  // the next step repeats it
  CHECK(run.orders[1].rate_rps == Approx(9));
  CHECK(run.orders[1].duration == run.orders[0].duration);  // the same length again
  const json& r = result_of(run.last);
  CHECK(r["max_slo_rate_rps"].get<double>() <= t);
  CHECK(r["max_slo_rate_rps"].get<double>() >= t * (1 - spec.sweep.tolerance) - 1e-9);
  CHECK(r["limiting_metric"] != "error_rate");
}

TEST_CASE("orchestrator: an outage on a step and its re-run is reported as availability, never saturation") {
  const JobSpec spec = sweep_spec();
  const double t = 23.3;
  const Run run = simulate_outage(spec, threshold(t), t, [](double rate, bool) { return rate == Approx(9); });
  const json& r = result_of(run.last);
  CHECK(r["limiting_metric"] == "error_rate");
  CHECK(r["slo_bracket_rps"][1].get<double>() == Approx(9));
  // Saturation is judged from the steps above, not from the outage.
  CHECK((r["saturation_rate_rps"].is_null() || r["saturation_rate_rps"].get<double>() > 9));
  bool warned = false;
  for (const auto& w : r["warnings"]) {
    const auto text = w.get<std::string>();
    if (text.find("target unavailable") != std::string::npos) {
      warned = true;
      CHECK(text.find("connect: 16") != std::string::npos);
      CHECK(text.find("1.5 s") != std::string::npos);
    }
  }
  CHECK(warned);
}

TEST_CASE("orchestrator: a failing rate below passing ones is re-run before it may bound the answer") {
  const JobSpec spec = sweep_spec();
  const double t = 23.3;
  // The first ladder rate failed once (a noisy neighbour), without the errors of an outage.
  auto once = [t](double rate, bool rerun) {
    return rate == Approx(9) && !rerun ? Verdict::fail : rate <= t ? Verdict::pass : Verdict::fail;
  };
  const Run run = simulate(spec, 2, 30, once, t);
  bool reran = false;
  for (const auto& o : run.orders) reran |= o.rerun && o.rate_rps == Approx(9);
  CHECK(reran);
  const json& r = result_of(run.last);
  CHECK(r["max_slo_rate_rps"].get<double>() >= t * (1 - spec.sweep.tolerance) - 1e-9);
  bool noted = false;
  for (const auto& w : r["warnings"]) noted |= w.get<std::string>().find("re-run before") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("orchestrator: slow rates get steps long enough for their percentile verdict, within the limit") {
  JobSpec spec = spec_with_p95();
  spec.sweep.max_step_duration = std::chrono::seconds(600);
  const auto need = samples_needed(spec.slo);
  REQUIRE(need.sized > need.decidable);
  CHECK(need.percentile_name == "p95_ttft_ms");
  // r_sync 0.5, r_max 0.8: the first ladder rate is slow.
  auto a = next_action(spec, {baseline(0.5), probe(0.8)});
  REQUIRE(std::holds_alternative<StepOrder>(a));
  const StepOrder o = std::get<StepOrder>(a);
  const double want_s = static_cast<double>(need.sized) / o.rate_rps;
  const double got_s = to_s(o.duration);
  CHECK(got_s >= std::min(want_s, 595.0) - 1e-6);
  CHECK(got_s <= 595.0 + 1e-6);  // max_step_duration - warm-up
  // A fast rate keeps the spec's own length.
  auto fast = next_action(spec, {baseline(20), probe(80)});
  CHECK(std::get<StepOrder>(fast).duration == spec.sweep.step_duration);
  // Sessions of 4 turns: each arrival sends 4 requests, so a quarter of the length holds as many.
  JobSpec sessions = spec;
  llm::SessionSpec four;
  four.turns = LengthDist::fixed(4);
  sessions.workload.sessions = four;
  const StepOrder s = std::get<StepOrder>(next_action(sessions, {baseline(0.5), probe(0.8)}));
  REQUIRE(s.rate_rps == o.rate_rps);
  CHECK(to_s(s.duration) == Approx(std::max(to_s(spec.sweep.step_duration), want_s / 4)).epsilon(1e-6));
  CHECK(s.duration < o.duration);
}

TEST_CASE("orchestrator: when no step may hold enough requests the answer says so") {
  JobSpec spec = spec_with_p95();
  spec.sweep.max_step_duration = std::chrono::seconds(60);
  // Everything passes at rates so low that 55 s hold fewer requests than a p95 needs.
  const Run run = simulate(
      spec, 0.2, 0.6, [](double, bool) { return Verdict::pass; }, 10);
  const json& r = result_of(run.last);
  bool warned = false;
  for (const auto& w : r["warnings"]) warned |= w.get<std::string>().find("cannot hold") != std::string::npos;
  CHECK(warned);
  CHECK(r["mlperf_scenario"] == "Server");  // Poisson arrivals judged against a latency bound
}

TEST_CASE(
    "orchestrator: with step.stop decided, fixed-rate steps are ordered decided at twice their length, or max_s") {
  JobSpec spec = sweep_spec();
  spec.slo.latency = {{LatencyMetric::ttft, 95.0, 800}};
  JobSpec decided = spec;
  decided.step.stop = StepStop::decided;
  std::vector<StepOutcome> steps{baseline(2), probe(20)};
  const auto fixed_order = std::get<StepOrder>(next_action(spec, steps));
  const auto decided_order = std::get<StepOrder>(next_action(decided, steps));
  REQUIRE(fixed_order.kind == StepKind::ladder);
  CHECK_FALSE(fixed_order.decided);
  CHECK(decided_order.decided);
  CHECK(decided_order.rate_rps == fixed_order.rate_rps);
  CHECK(decided_order.duration == 2 * fixed_order.duration);
  decided.step.max = std::chrono::seconds(45);
  CHECK(std::get<StepOrder>(next_action(decided, steps)).duration == std::chrono::seconds(45));
  // Never past sweep.max_step_duration_s.
  decided.step.max.reset();
  decided.sweep.max_step_duration = std::chrono::seconds(50);
  CHECK(std::get<StepOrder>(next_action(decided, steps)).duration == std::chrono::seconds(45));
  // The baseline and the probe count requests: never decided.
  CHECK_FALSE(std::get<StepOrder>(next_action(decided, {})).decided);
}

namespace {

JobSpec scout_spec() {
  JobSpec s = sweep_spec();
  s.sweep.search = SweepSearch::scout;
  s.sweep.step_duration = std::chrono::seconds(60);
  s.sweep.warmup = std::chrono::seconds(10);
  s.sweep.scout_duration = std::chrono::seconds(15);
  s.sweep.scout_warmup = std::chrono::seconds(5);
  return s;
}

// A fabricated server whose capacity is `capacity` for a full-length step, while a short step
// still passes up to `capacity * (1 + flatter)` (its queue has not built yet). Its p95 TTFT
// against an 800-ms bound rises with the rate and crosses the bound at the rate a step passes to.
StepOutcome judged_step(const StepOrder& order, double capacity, double flatter) {
  const double limit = order.scout ? capacity * (1 + flatter) : capacity;
  StepOrder plain = order;
  StepOutcome o = fixed_step(
      plain, [limit](double rate, bool) { return rate <= limit ? Verdict::pass : Verdict::fail; }, capacity);
  o.scout = order.scout;
  const double ttft = 800 * std::pow(order.rate_rps / limit, 3);
  o.evaluation = {
      {"criteria", json::array({{{"name", "p95_ttft_ms"}, {"bound", 800}, {"comparison", "<="}, {"measured", ttft}}})}};
  o.summary["duration_s"] = to_s(order.duration);
  o.summary["phase"] = order.phase;
  o.wall_s = to_s(order.duration + order.warmup);
  return o;
}

struct Timed {
  Run run;
  double seconds = 0;  // warm-up + measured of every fixed-rate step
  int full = 0, scouts = 0;
};

Timed simulate_timed(const JobSpec& spec, double r_sync, double r_max, double capacity, double flatter) {
  Timed t;
  t.run.steps = {baseline(r_sync), probe(r_max)};
  for (int guard = 0; guard < 200; ++guard) {
    t.run.last = next_action(spec, t.run.steps);
    const auto* order = std::get_if<StepOrder>(&t.run.last);
    if (!order) return t;
    t.run.orders.push_back(*order);
    t.run.steps.push_back(judged_step(*order, capacity, flatter));
    t.seconds += to_s(order->duration + order->warmup);
    ++(order->scout ? t.scouts : t.full);
  }
  FAIL("the sweep did not finish in 200 steps");
  return t;
}

}  // namespace

TEST_CASE("orchestrator: a scouting sweep starts with a short step at the probe's rate") {
  const JobSpec spec = scout_spec();
  const auto a = next_action(spec, {baseline(2), probe(30)});
  REQUIRE(std::holds_alternative<StepOrder>(a));
  const auto& o = std::get<StepOrder>(a);
  CHECK(o.scout);
  CHECK(o.phase == "scout");
  CHECK(o.rate_rps == Approx(30));
  CHECK(o.duration == spec.sweep.scout_duration);
  CHECK(o.warmup == spec.sweep.scout_warmup);
  const Plan p = rate_progress(spec, {baseline(2), probe(30)});
  CHECK(p.phase == "scout");
  CHECK(p.steps_planned > 3);
}

TEST_CASE("orchestrator: a scouting sweep claims only a full-length pass, however much its scouts flatter") {
  for (double flatter : {0.0, 0.04, 0.12}) {
    for (double capacity : {23.3, 29.0, 11.0, 4.5}) {
      CAPTURE(flatter, capacity);
      const JobSpec spec = scout_spec();
      const Timed t = simulate_timed(spec, 2, 30, capacity, flatter);
      const json& r = result_of(t.run.last);
      REQUIRE(r["max_slo_rate_rps"].is_number());
      const double max = r["max_slo_rate_rps"].get<double>();
      const double fail = r["slo_bracket_rps"][1].get<double>();
      CHECK(max <= capacity);
      CHECK(fail > capacity);
      CHECK((fail - max) / max <= spec.sweep.tolerance + 1e-9);
      // The answer is a full-length step's pass.
      bool claimed_by_full = false;
      for (const auto& s : t.run.steps)
        claimed_by_full |= !s.scout && s.offered_rate_rps == max && s.verdict == Verdict::pass;
      CHECK(claimed_by_full);
      CHECK(r["search"]["mode"] == "scout");
      CHECK(r["search"]["scout_steps"] == t.scouts);
      CHECK(r["search"]["full_steps"] == t.full);
      CHECK(r["search"]["time_s"]["scout"].get<double>() == Approx(t.scouts * 20.0));
      CHECK(r["search"]["resolution"]["capacity_interval_rps"][1].get<double>() == Approx(fail));
      CHECK(r["warnings"].empty());
      // The same server swept by the ladder (its steps' planned lengths, no early ends): where
      // scouts do not flatter, the scouting sweep's steps cost at most a half; where they flatter
      // by a 15-s step's resolution (~4%), less than the ladder's.
      JobSpec ladder = spec;
      ladder.sweep.search = SweepSearch::ladder;
      const Timed l = simulate_timed(ladder, 2, 30, capacity, flatter);
      CHECK(result_of(l.run.last)["search"]["mode"] == "ladder");
      if (flatter == 0) CHECK(t.seconds <= 0.5 * l.seconds);
      if (flatter < 0.05) CHECK(t.seconds < l.seconds);
      if (flatter == 0) CHECK(t.full == 1);  // the confirm of the highest scout pass
    }
  }
}

TEST_CASE("orchestrator: a scouting sweep escalates while scouts pass and confirms the cap") {
  const JobSpec spec = scout_spec();
  const Timed t = simulate_timed(spec, 2, 30, 1000, 0);
  const json& r = result_of(t.run.last);
  CHECK(r["max_slo_rate_rps"].get<double>() == Approx(100));  // sweep.max_rate_rps
  CHECK(r["slo_bracket_rps"][1].is_null());
  REQUIRE(r["warnings"].size() == 1);
  for (const auto& o : t.run.orders) CHECK(o.rate_rps <= 100);
  CHECK(t.full == 1);
  CHECK_FALSE(t.run.orders.back().scout);
}

TEST_CASE("orchestrator: a scouting sweep where nothing passes steps down and answers no rate") {
  const JobSpec spec = scout_spec();
  const Timed t = simulate_timed(spec, 2, 30, 0.01, 0);
  const json& r = result_of(t.run.last);
  CHECK(r["max_slo_rate_rps"].is_null());
  CHECK(t.full == 0);  // nothing to confirm
  CHECK(t.run.orders.back().rate_rps >= 2.0 / 8);
  CHECK_FALSE(r["warnings"].empty());
}

TEST_CASE("orchestrator: a full step's inconclusive confirm is re-run, a scout's never") {
  const JobSpec spec = scout_spec();
  std::vector<StepOutcome> steps{baseline(2), probe(30)};
  StepOrder scout = std::get<StepOrder>(next_action(spec, steps));
  StepOutcome s = judged_step(scout, 20, 0);
  s.verdict = Verdict::inconclusive;
  steps.push_back(s);
  const auto after_scout = std::get<StepOrder>(next_action(spec, steps));
  CHECK(after_scout.scout);  // counted as failing: the search moves below it
  CHECK(after_scout.rate_rps < scout.rate_rps);
  CHECK_FALSE(after_scout.rerun);
  // Scout on to the confirm, and make the confirm inconclusive: it is re-run, twice as long.
  StepOrder next = after_scout;
  for (int guard = 0; guard < 20 && next.scout; ++guard) {
    steps.push_back(judged_step(next, 20, 0));
    next = std::get<StepOrder>(next_action(spec, steps));
  }
  REQUIRE(next.phase == "confirm");
  CHECK(next.decided);  // a fail may end it early; a pass needs its whole length
  StepOutcome c = judged_step(next, 20, 0);
  c.verdict = Verdict::inconclusive;
  steps.push_back(c);
  const auto rerun = std::get<StepOrder>(next_action(spec, steps));
  CHECK(rerun.rerun);
  CHECK(rerun.rate_rps == next.rate_rps);
  CHECK(rerun.duration == 2 * next.duration);
}

TEST_CASE("orchestrator: a scout's flags and wall time round-trip through the stored JSON") {
  StepOutcome o;
  o.kind = StepKind::refine;
  o.scout = true;
  o.wall_s = 21.5;
  const auto back = StepOutcome::from_json(o.to_json()).value();
  CHECK(back.scout);
  CHECK(back.wall_s == 21.5);
  StepOutcome plain;
  const auto j = plain.to_json();
  CHECK_FALSE(j.contains("scout"));
  CHECK_FALSE(StepOutcome::from_json(j).value().scout);
}

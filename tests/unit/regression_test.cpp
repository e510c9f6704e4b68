// The regression job, sans I/O: the order of its runs and quality passes, and its verdicts on
// fabricated steps (read back from their stored form, as after a restart).
#include "sweep/regression.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <functional>
#include <map>

#include "sweep/kinds.hpp"

using namespace capsweep;
using namespace capsweep::sweep;
using json = nlohmann::json;

namespace {

JobSpec regression_spec(int rounds = 3, bool quality = false) {
  JobSpec s;
  s.kind = JobKind::regression;
  s.base_url = "http://a";
  s.target.model = "m";
  s.candidate = CandidateTarget{};
  s.candidate->base_url = "http://b";
  s.candidate->target.model = "m";
  s.regression.rate_rps = 8;
  s.regression.rounds = rounds;
  s.regression.cooldown = std::chrono::seconds(5);
  for (std::size_t i = 0; i < 3; ++i) s.regression.metrics.push_back(gate_metric_catalogue()[i]);
  if (quality) {
    QualitySettings q;
    q.dataset.id = "ds-0000000000000000";
    q.checks = {QualityCheck::json, QualityCheck::determinism};
    s.quality = q;
  }
  return s;
}

// The summary a run step stores: the metric values `values(role, round)` gives.
using Values = std::function<json(Role, int)>;

// Runs the job to its end; the result, with `orders` every step asked for.
// `limited(role, round)` marks a run whose load generator fell behind its schedule.
json run(const JobSpec& spec, const Values& values, std::vector<StepOrder>& orders,
         const std::function<json(Role, int)>& quality = {}, const std::function<bool(Role, int)>& limited = {}) {
  std::vector<StepOutcome> steps;
  for (int guard = 0; guard < 100; ++guard) {
    const Action a = next_action(spec, steps);
    if (const auto* f = std::get_if<Finish>(&a)) return f->result;
    if (const auto* fail = std::get_if<Fail>(&a)) FAIL(fail->reason);
    const StepOrder& o = std::get<StepOrder>(a);
    orders.push_back(o);
    StepOutcome s;
    s.kind = o.kind;
    s.role = o.role;
    s.round = o.round;
    s.completed = s.measured = 80;
    s.verdict = Verdict::pass;
    s.generator_limited = limited && o.kind == StepKind::run && limited(*o.role, o.round);
    auto stored = StepOutcome::from_json(s.to_json());
    REQUIRE(stored.has_value());
    stored->summary = o.kind == StepKind::run ? values(*o.role, o.round) : quality(*o.role, o.round);
    steps.push_back(*stored);
  }
  FAIL("the job did not finish");
  return {};
}

json latencies(double ttft, double itl, double goodput = 8, double attainment = 100) {
  return {{"p95_ttft_ms", ttft},
          {"p95_itl_ms", itl},
          {"request_goodput", goodput},
          {"goodput_attainment_pct", attainment},
          {"achieved_rate_rps", 8.0}};
}

}  // namespace

TEST_CASE("regression: each round runs both sides (alternate: baseline first), cooldown before all but the first") {
  std::vector<StepOrder> orders;
  const JobSpec spec = regression_spec(3);
  run(
      spec, [](Role, int) { return latencies(20, 10); }, orders);
  REQUIRE(orders.size() == 6);
  for (int i = 0; i < 6; ++i) {
    CHECK(orders[i].kind == StepKind::run);
    CHECK(orders[i].role == (i % 2 == 0 ? Role::baseline : Role::candidate));
    CHECK(orders[i].round == i / 2);
    CHECK(orders[i].rate_rps == 8);
    CHECK(orders[i].pause_before == (i == 0 ? Nanos{0} : spec.regression.cooldown));
  }
  CHECK(orders[3].phase == "round 2 candidate");
}

TEST_CASE("regression: shuffled order is seeded per round and runs both sides every round") {
  JobSpec spec = regression_spec(20);
  spec.regression.order = RunOrder::shuffled;
  int candidate_first = 0;
  for (int r = 0; r < 20; ++r) {
    const auto o = round_order(spec, r);
    REQUIRE(o.size() == 2);
    CHECK(o[0] != o[1]);
    candidate_first += o[0] == Role::candidate;
    CHECK(round_order(spec, r) == o);  // the same seed, the same order
  }
  CHECK(candidate_first > 2);
  CHECK(candidate_first < 18);
  spec.workload.seed = 99;
  bool differs = false;
  for (int r = 0; r < 20; ++r) differs |= round_order(spec, r) != round_order(regression_spec(20), r);
  CHECK(differs);
}

TEST_CASE("regression: identical sides pass every metric - a 25% slower candidate fails ITL and TTFT") {
  std::vector<StepOrder> orders;
  // Each round's load moves both sides alike (rounds 0..2 at 95%, 100%, 108%).
  const double load[] = {0.95, 1.0, 1.08};
  const json same = run(
      regression_spec(), [&](Role, int r) { return latencies(20 * load[r], 10 * load[r]); }, orders);
  CHECK(same["verdict"] == "pass");
  for (const auto& [k, m] : same["metrics"].items()) {
    INFO(k);
    CHECK(m["verdict"] == "pass");
    CHECK(m["test"] == "paired_t_log_ratio");
    CHECK(m["change_pct"] == 0.0);
    CHECK(m["a_to_a_exceeds_threshold"] == false);
  }
  CHECK(same["metrics"]["p95_ttft_ms"]["baseline_spread_pct"].get<double>() > 10);  // the rounds' load, not noise
  orders.clear();
  const json slow = run(
      regression_spec(),
      [&](Role role, int r) {
        const double f = role == Role::candidate ? 1.25 * (1 + 0.01 * r) : 1.0;
        return latencies(20 * load[r] * f, 10 * load[r] * f);
      },
      orders);
  CHECK(slow["verdict"] == "fail");
  CHECK(slow["metrics"]["p95_itl_ms"]["verdict"] == "fail");
  CHECK(slow["metrics"]["p95_itl_ms"]["change_pct"].get<double>() == Approx(26.3).margin(0.5));
  CHECK(slow["metrics"]["p95_itl_ms"]["p_value"].get<double>() < 0.05);
  CHECK(slow["metrics"]["request_goodput"]["verdict"] == "pass");
  CHECK(slow["runs"].size() == 6);
  CHECK(slow["conditions"]["order"][1] == json::array({"baseline", "candidate"}));
}

TEST_CASE("regression: a run whose generator fell behind its schedule makes a pass inconclusive") {
  std::vector<StepOrder> orders;
  const auto same = [](Role, int) { return latencies(20, 10); };
  const json clean = run(regression_spec(), same, orders);
  CHECK(clean["verdict"] == "pass");
  CHECK(clean["generator_limited"] == false);
  const json behind =
      run(regression_spec(), same, orders, {}, [](Role role, int r) { return role == Role::candidate && r == 1; });
  CHECK(behind["verdict"] == "inconclusive");
  CHECK(behind["generator_limited"] == true);
  CHECK(behind["runs"][3]["generator_limited"] == true);
  CHECK(behind["warnings"].dump().find("round 2 candidate") != std::string::npos);
  const json slow_and_behind = run(
      regression_spec(), [](Role role, int) { return role == Role::candidate ? latencies(30, 15) : latencies(20, 10); },
      orders, {}, [](Role, int) { return true; });
  // As a check's SLO judgement does: only a pass is withheld; the fail stands, with the warning.
  CHECK(slow_and_behind["verdict"] == "fail");
}

TEST_CASE("regression: a comparison noisier than its threshold is never passed, and fails only beyond the noise") {
  std::vector<StepOrder> orders;
  // The candidate's runs swing +-20% against the baseline's from round to round, around no change.
  const double swing[] = {0.8, 1.2, 1.0};
  const json r = run(
      regression_spec(),
      [&](Role role, int round) {
        const double f = role == Role::candidate ? swing[round] : 1.0;
        return latencies(20 * f, 10);
      },
      orders);
  const json& ttft = r["metrics"]["p95_ttft_ms"];
  CHECK(ttft["verdict"] == "inconclusive");
  CHECK(ttft["a_to_a_exceeds_threshold"] == true);
  CHECK(ttft["spread_of"] == "per-round ratios");
  CHECK(r["verdict"] == "inconclusive");
  bool warned = false;
  for (const auto& w : r["warnings"]) warned |= w.get<std::string>().rfind("p95_ttft_ms: run-to-run variation", 0) == 0;
  CHECK(warned);
}

TEST_CASE("regression: quality passes follow the runs - determinism compares each side with its own repeat") {
  std::vector<StepOrder> orders;
  // 100 JSON items: the candidate breaks 12 and answers 5 differently on its repeat.
  auto quality = [](Role role, int pass) {
    json answers = json::array();
    for (int i = 0; i < 100; ++i) {
      const bool changes = role == Role::candidate && pass == 1 && i < 5;
      answers.push_back(changes ? "changed" : "h" + std::to_string(i));
    }
    const int ok = role == Role::candidate ? 88 : 100;
    return json{{"checks", {{"json", {{"n", 100}, {"ok", ok}}}}}, {"answers", answers}};
  };
  const json r = run(
      regression_spec(3, true), [](Role, int) { return latencies(20, 10); }, orders, quality);
  REQUIRE(orders.size() == 6 + 4);
  CHECK(orders[6].kind == StepKind::quality);
  CHECK(orders[6].role == Role::baseline);
  CHECK(orders[7].role == Role::candidate);
  CHECK(orders[8].round == 1);  // the repeat
  CHECK(orders[9].phase == "quality candidate repeat");
  const json& j = r["quality"]["json"];
  CHECK(j["verdict"] == "fail");
  CHECK(j["baseline_rate"] == 1.0);
  CHECK(j["candidate_rate"] == 0.88);
  CHECK(j["drop_pp"] == 12.0);
  CHECK(j["p_value"].get<double>() < 0.001);
  const json& d = r["quality"]["determinism"];
  CHECK(d["baseline_rate"] == 1.0);
  CHECK(d["candidate_rate"] == 0.95);
  CHECK(d["cross_match_rate"] == 1.0);
  CHECK(d["verdict"] == "fail");  // 5 pp below the baseline's, significant (p ~ 0.03)
  CHECK(r["verdict"] == "fail");
}

TEST_CASE("regression: a small drop past the bound with few items is inconclusive, not a fail") {
  std::vector<StepOrder> orders;
  auto quality = [](Role role, int) {
    const int ok = role == Role::candidate ? 18 : 20;
    return json{{"checks", {{"json", {{"n", 20}, {"ok", ok}}}}}, {"answers", json::array()}};
  };
  JobSpec spec = regression_spec(3, true);
  spec.quality->checks = {QualityCheck::json};
  const json r = run(
      spec, [](Role, int) { return latencies(20, 10); }, orders, quality);
  CHECK(r["quality"]["json"]["verdict"] == "inconclusive");
  CHECK(r["quality"]["json"]["drop_pp"] == 10.0);
}

TEST_CASE("regression: a baseline whose run answered nothing ends the job, naming the round") {
  std::vector<StepOutcome> steps;
  const JobSpec spec = regression_spec();
  StepOutcome dead;
  dead.kind = StepKind::run;
  dead.role = Role::baseline;
  dead.round = 0;
  dead.completed = 0;
  dead.measured = 80;
  steps.push_back(dead);
  const Action a = next_action(spec, steps);
  REQUIRE(std::holds_alternative<Fail>(a));
  CHECK(std::get<Fail>(a).reason.rfind("round 1: no request of the baseline's run succeeded (80 sent)", 0) == 0);
}

TEST_CASE("regression: a stored step's role and round survive the round trip - an unknown role is unreadable") {
  StepOutcome s;
  s.kind = StepKind::quality;
  s.role = Role::candidate;
  s.round = 1;
  const auto back = StepOutcome::from_json(s.to_json());
  REQUIRE(back.has_value());
  CHECK(back->kind == StepKind::quality);
  CHECK(back->role == Role::candidate);
  CHECK(back->round == 1);
  json bad = s.to_json();
  bad["role"] = "third";
  CHECK_FALSE(StepOutcome::from_json(bad).has_value());
  StepOutcome plain;
  CHECK_FALSE(StepOutcome::from_json(plain.to_json())->role.has_value());
}

TEST_CASE("regression: progress counts the runs and the quality passes") {
  const JobSpec spec = regression_spec(3, true);
  const Plan p = plan_progress(spec, {});
  CHECK(p.steps_planned == 6 + 4);
  CHECK(p.phase == "round 1 baseline");
}

TEST_CASE("regression: a judge gates the verdict only once its scores agree with human labels - else advisory") {
  // 30 items each side: the candidate's answers score 4 where the baseline's score 8 (a clear
  // drop); every JSON answer is fine, so only the judge could fail the job.
  auto quality_with = [](const json& calibration_scores) {
    return [calibration_scores](Role role, int pass) {
      json scores = json::array();
      for (int i = 0; i < 30; ++i) scores.push_back(role == Role::candidate ? 4 + i % 2 : 8 + i % 2);
      json s{{"checks", {{"json", {{"n", 30}, {"ok", 30}}}}}, {"answers", json::array()}, {"scores", scores}};
      if (role == Role::baseline && pass == 0 && !calibration_scores.is_null())
        s["calibration_scores"] = calibration_scores;
      return s;
    };
  };
  JobSpec spec = regression_spec(3, true);
  spec.quality->checks = {QualityCheck::json};
  spec.judge = JudgeSettings{};
  spec.judge->scale = 10;
  const auto same = [](Role, int) { return latencies(20, 10); };
  std::vector<StepOrder> orders;

  // No calibration set: the judge's fail is shown, advisory; the job passes.
  json r = run(spec, same, orders, quality_with(nullptr));
  CHECK(r["judge"]["verdict"] == "fail");
  CHECK(r["judge"]["gates"] == false);
  CHECK(r["judge"]["calibration"]["calibrated"] == false);
  CHECK(r["verdict"] == "pass");
  CHECK(r["warnings"].dump().find("advisory") != std::string::npos);

  // 20 labelled answers, human scores 1..10 twice.
  JudgeCalibration cal;
  for (int i = 0; i < 20; ++i) cal.items.push_back({"q", "ref", "answer", static_cast<double>(1 + i % 10)});
  cal.min_agreement = 0.6;
  spec.judge->calibration = cal;
  // A judge that ranks the answers as the humans did (off by one now and then): it gates.
  json agreeing = json::array();
  for (int i = 0; i < 20; ++i) agreeing.push_back(std::min(10, 1 + i % 10 + (i % 3 == 0 ? 1 : 0)));
  r = run(spec, same, orders, quality_with(agreeing));
  const json& c = r["judge"]["calibration"];
  INFO(c.dump());
  CHECK(c["calibrated"] == true);
  CHECK(c["scored"] == 20);
  CHECK(c["spearman"].get<double>() > 0.95);
  CHECK(c["ci"][0].get<double>() >= 0.6);
  CHECK(r["judge"]["gates"] == true);
  CHECK(r["verdict"] == "fail");  // the calibrated judge's fail is the job's

  // A judge whose scores have nothing to do with the labels: advisory again.
  json random_scores = json::array();
  for (int i = 0; i < 20; ++i) random_scores.push_back((i * 7) % 10 + 1);
  r = run(spec, same, orders, quality_with(random_scores));
  INFO(r["judge"].dump());
  CHECK(r["judge"]["calibration"]["calibrated"] == false);
  CHECK(r["judge"]["calibration"]["ci"][0].get<double>() < 0.6);
  CHECK(r["verdict"] == "pass");

  // A judge that scored too few of the labelled answers cannot be calibrated.
  json few = json::array();
  for (int i = 0; i < 20; ++i) few.push_back(i < 5 ? json(1 + i) : json(nullptr));
  r = run(spec, same, orders, quality_with(few));
  CHECK(r["judge"]["calibration"]["scored"] == 5);
  CHECK(r["judge"]["calibration"]["calibrated"] == false);
  CHECK(r["verdict"] == "pass");
}

TEST_CASE("regression: sequential rounds go on until every metric is decided, spending alpha over the looks") {
  // The candidate's TTFT per round around no change: noisy in the first three rounds, steadier
  // after. ITL and goodput are the baseline's exactly.
  const double noise[] = {1.04, 0.97, 1.03, 1.0, 1.01, 0.99, 1.0, 1.01, 0.99, 1.0, 1.01, 0.99};
  const auto values = [&](Role role, int r) { return latencies(20 * (role == Role::candidate ? noise[r] : 1.0), 10); };
  std::vector<StepOrder> orders;
  const json fixed = run(regression_spec(3), values, orders);
  CHECK(fixed["metrics"]["p95_ttft_ms"]["verdict"] == "inconclusive");  // three rounds cannot tell
  CHECK_FALSE(fixed.contains("sequential"));
  JobSpec spec = regression_spec(3);
  spec.regression.max_rounds = 10;
  orders.clear();
  const json r = run(spec, values, orders);
  INFO(r.dump());
  CHECK(r["verdict"] == "pass");
  const int n = r["sequential"]["rounds_run"].get<int>();
  CHECK(n > 3);
  CHECK(n < 10);
  CHECK(orders.size() == 2 * static_cast<std::size_t>(n));
  CHECK(r["sequential"]["stopped"] == fmt::format("every metric decided after {} rounds", n));
  CHECK(r["sequential"]["looks"] == n - 2);
  CHECK(r["sequential"]["alpha_per_look"].get<double>() == Approx(0.05 / 8));
  CHECK(r["metrics"]["p95_ttft_ms"]["alpha"].get<double>() == Approx(0.05 / 8));
  CHECK(r["metrics"]["p95_ttft_ms"]["candidate_runs"].size() == static_cast<std::size_t>(n));
  CHECK(r["conditions"]["rounds"] == n);
  CHECK(r["runs"].size() == 2 * static_cast<std::size_t>(n));
  // Progress plans the rounds known so far: the first look's, then one more at a time.
  CHECK(plan_progress(spec, {}).steps_planned == 6);
}

TEST_CASE("regression: sequential rounds stop at the first look that fails, and at max_rounds when undecided") {
  JobSpec spec = regression_spec(3);
  spec.regression.max_rounds = 8;
  std::vector<StepOrder> orders;
  const json slow = run(
      spec,
      [](Role role, int r) {
        const double f = role == Role::candidate ? 1.25 * (1 + 0.01 * r) : 1.0;
        return latencies(20 * f, 10 * f);
      },
      orders);
  CHECK(slow["verdict"] == "fail");
  CHECK(slow["sequential"]["rounds_run"] == 3);
  CHECK(slow["sequential"]["stopped"].get<std::string>().find("failed after 3 rounds") != std::string::npos);
  CHECK(orders.size() == 6);
  // A TTFT 9% higher, +-1.5% a round: never within the 10% threshold's reach, never beyond it.
  orders.clear();
  const json near = run(
      spec,
      [](Role role, int r) { return latencies(20 * (role == Role::candidate ? (r % 2 ? 1.075 : 1.105) : 1.0), 10); },
      orders);
  CHECK(near["verdict"] == "inconclusive");
  CHECK(near["sequential"]["rounds_run"] == 8);
  CHECK(near["sequential"]["undecided"] == json::array({"p95_ttft_ms"}));
  CHECK(near["sequential"]["stopped"] == "max_rounds (8) reached with p95_ttft_ms undecided");
  CHECK(orders.size() == 16);
}

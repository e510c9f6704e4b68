// The concurrency sweep: one closed-loop step per level, the stop rule, and the answer
// (the most users passing with every smaller level passing too).
#include "sweep/levels.hpp"

#include <catch2/catch.hpp>
#include <functional>

#include "sweep/kinds.hpp"

using namespace capsweep;
using namespace capsweep::sweep;
using json = nlohmann::json;

namespace {

JobSpec concurrency_spec(std::vector<std::uint32_t> levels) {
  JobSpec s;
  s.kind = JobKind::sweep;
  s.sweep.mode = SweepMode::concurrency;
  s.sweep.levels = std::move(levels);
  s.sweep.step_duration = std::chrono::seconds(30);
  s.sweep.warmup = std::chrono::seconds(5);
  s.sweep.stop_after_failures = 2;
  return s;
}

// Runs the sweep to its end against `verdict(users)`; the finished result.
json run(const JobSpec& spec, const std::function<Verdict(std::uint32_t)>& verdict, std::vector<std::uint32_t>& ran) {
  std::vector<StepOutcome> steps;
  for (int guard = 0; guard < 100; ++guard) {
    const Action a = next_action(spec, steps);
    if (const auto* f = std::get_if<Finish>(&a)) return f->result;
    REQUIRE(std::holds_alternative<StepOrder>(a));
    const StepOrder& o = std::get<StepOrder>(a);
    CHECK(o.kind == StepKind::level);
    CHECK(o.closed_loop);
    CHECK(o.duration == spec.sweep.step_duration);
    ran.push_back(o.concurrency);
    StepOutcome s;
    s.kind = StepKind::level;
    s.users = o.concurrency;
    s.verdict = verdict(o.concurrency);
    s.measured_rate_rps = 2.0 * o.concurrency;
    s.measured = 100;
    if (s.verdict != Verdict::pass) s.limiting_metric = "p95_ttft_ms";
    s.summary = {{"p95_ttft_ms", 10.0 * o.concurrency}};
    // A stored step is read back before the next decision, as after a restart.
    steps.push_back(*StepOutcome::from_json(s.to_json()));
    steps.back().summary = s.summary;
  }
  FAIL("the sweep did not finish");
  return {};
}

}  // namespace

TEST_CASE("levels: every level in order, the answer is the last passing one") {
  std::vector<std::uint32_t> ran;
  const json r = run(
      concurrency_spec({1, 2, 4, 8, 16}), [](std::uint32_t u) { return u <= 4 ? Verdict::pass : Verdict::fail; }, ran);
  CHECK(ran == std::vector<std::uint32_t>{1, 2, 4, 8, 16});  // two misses in a row end it
  CHECK(r["mode"] == "concurrency");
  CHECK(r["max_slo_concurrency"] == 4);
  CHECK(r["rate_at_max_slo_concurrency_rps"] == 8.0);
  CHECK(r["limiting_metric"] == "p95_ttft_ms");
  REQUIRE(r["levels"].size() == 5);
  CHECK(r["levels"][2]["users"] == 4);
  CHECK(r["levels"][2]["p95_ttft_ms"] == 40.0);
  CHECK(r["warnings"].empty());
}

TEST_CASE("levels: two misses in a row stop the sweep early") {
  std::vector<std::uint32_t> ran;
  const json r = run(
      concurrency_spec({1, 2, 4, 8, 16, 32}), [](std::uint32_t u) { return u <= 2 ? Verdict::pass : Verdict::fail; },
      ran);
  CHECK(ran == std::vector<std::uint32_t>{1, 2, 4, 8});
  CHECK(r["max_slo_concurrency"] == 2);
}

TEST_CASE("levels: a failing level below a passing one caps the answer and is named") {
  std::vector<std::uint32_t> ran;
  const json r = run(
      concurrency_spec({1, 2, 4, 8}),
      [](std::uint32_t u) { return u == 2   ? Verdict::inconclusive
                                   : u <= 4 ? Verdict::pass
                                            : Verdict::fail; }, ran);
  CHECK(r["max_slo_concurrency"] == 1);
  bool non_monotone = false, inconclusive = false;
  for (const auto& w : r["warnings"]) {
    non_monotone |= w.get<std::string>().find("non-monotone") != std::string::npos;
    inconclusive |= w.get<std::string>().find("inconclusive") != std::string::npos;
  }
  CHECK(non_monotone);
  CHECK(inconclusive);
}

TEST_CASE("levels: none passing, and all passing, say so") {
  std::vector<std::uint32_t> ran;
  const json none = run(
      concurrency_spec({2, 4, 8}), [](std::uint32_t) { return Verdict::fail; }, ran);
  CHECK(none["max_slo_concurrency"].is_null());
  CHECK(none["warnings"][0].get<std::string>().find("no level") != std::string::npos);
  ran.clear();
  const json all = run(
      concurrency_spec({2, 4}), [](std::uint32_t) { return Verdict::pass; }, ran);
  CHECK(all["max_slo_concurrency"] == 4);
  CHECK(all["warnings"][0].get<std::string>().find("above 4 users") != std::string::npos);
  CHECK(all["limiting_metric"].is_null());
}

TEST_CASE("levels: progress counts the levels") {
  const JobSpec spec = concurrency_spec({1, 2, 4});
  const Plan p = plan_progress(spec, {});
  CHECK(p.phase == "level");
  CHECK(p.steps_planned == 3);
}

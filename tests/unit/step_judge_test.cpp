// judge_step on fabricated step results: the SLO verdict, saturation, an outage told apart
// from capacity, and "no success never passes".
#include "sweep/step_judge.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;
using namespace capsweep::sweep;
using json = nlohmann::json;

namespace {

JobSpec check_spec() {
  JobSpec s;
  s.kind = JobKind::check;
  s.slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  s.slo.max_error_rate = 0.001;
  return s;
}

StepOrder order_at(double rate) {
  StepOrder o;
  o.kind = StepKind::check;
  o.phase = "check";
  o.rate_rps = rate;
  o.duration = std::chrono::seconds(100);
  return o;
}

// `n` requests at `rate` over [0, n / rate) s, each answered with 64 tokens at TTFT `ttft_ms`;
// those for which `fails(i)` answers an outcome fail with it instead.
loadgen::StepResult fabricate(int n, double rate, double ttft_ms,
                              const std::function<std::optional<Outcome>(int)>& fails) {
  StepWindow w;
  w.end = Nanos(static_cast<Nanos::rep>(n / rate * 1e9));
  w.offered_rate_rps = rate;
  StepAccumulator acc(w);
  loadgen::StepResult res;
  for (int i = 0; i < n; ++i) {
    RequestRecord r;
    r.scheduled = r.dispatched = r.sent = Nanos(static_cast<Nanos::rep>(i / rate * 1e9));
    r.input_tokens = 100;
    loadgen::RequestRow row;
    row.index = static_cast<std::uint64_t>(i);
    row.scheduled_ms = row.sent_ms = row.dispatched_ms = to_ms(r.scheduled);
    if (auto bad = fails(i)) {
      r.outcome = *bad;
      r.finished = r.sent + std::chrono::milliseconds(1);
      row.ttft_ms = row.e2el_ms = std::numeric_limits<double>::quiet_NaN();
    } else {
      const Nanos first = r.sent + Nanos(static_cast<Nanos::rep>(ttft_ms * 1e6));
      for (int k = 0; k < 64; ++k) r.chunks.push_back({first + std::chrono::milliseconds(20 * k), 1});
      r.output_tokens = 64;
      r.finished = r.chunks.back().arrival;
      row.ttft_ms = ttft_ms;
      row.e2el_ms = to_ms(r.finished - r.scheduled);
      row.output_tokens = 64;
    }
    row.finished_ms = to_ms(r.finished);
    row.outcome = r.outcome;
    acc.add(r);
    res.requests.push_back(row);
  }
  res.metrics = std::move(acc).finish();
  res.backlog = loadgen::client_backlog(res.requests, res.metrics);  // as the step runner derives it
  return res;
}

}  // namespace

TEST_CASE("step judge: a healthy step passes with its latency as the limiting metric") {
  const auto res = fabricate(400, 4, 100, [](int) { return std::nullopt; });
  const JudgedStep j = judge_step(check_spec(), order_at(4), res);
  CHECK(j.outcome.verdict == Verdict::pass);
  CHECK_FALSE(j.outcome.unavailable);
  CHECK_FALSE(j.outcome.saturated);
  CHECK(j.row.verdict == "pass");
  CHECK(j.row.offered_rate_rps == Approx(4));
  CHECK(j.requests.size() == 400);
  CHECK(j.row.summary["slo_pass"] == true);
}

TEST_CASE("step judge: slow answers fail on the latency bound") {
  const auto res = fabricate(400, 4, 2000, [](int) { return std::nullopt; });
  const JudgedStep j = judge_step(check_spec(), order_at(4), res);
  CHECK(j.outcome.verdict == Verdict::fail);
  CHECK(j.outcome.limiting_metric == "p95_ttft_ms");
  CHECK_FALSE(j.outcome.unavailable);
}

TEST_CASE("step judge: a burst of refused connections is an outage, not saturation") {
  // Requests 100-139 (10 s of 100) hit a target that was down.
  const auto res = fabricate(
      400, 4, 100, [](int i) { return i >= 100 && i < 140 ? std::optional(Outcome::connect) : std::nullopt; });
  const JudgedStep j = judge_step(check_spec(), order_at(4), res);
  CHECK(j.outcome.verdict == Verdict::fail);
  CHECK(j.outcome.unavailable);
  CHECK_FALSE(j.outcome.saturated);
  CHECK(j.outcome.limiting_metric == "error_rate");
  const json& outage = j.row.summary["outage"];
  CHECK(outage["errors"]["connect"] == 40);
  CHECK(outage["first_error_s"].get<double>() == Approx(25));
  CHECK(outage["last_error_s"].get<double>() == Approx(34.75));
  // And the stored outcome carries it for the orchestrator.
  CHECK(StepOutcome::from_json(json::parse(j.row.outcome.dump()))->unavailable);
}

TEST_CASE("step judge: timeouts are load, not an outage, and errors within the bound are neither") {
  const auto slow =
      fabricate(400, 4, 100, [](int i) { return i % 10 == 0 ? std::optional(Outcome::timeout) : std::nullopt; });
  CHECK_FALSE(judge_step(check_spec(), order_at(4), slow).outcome.unavailable);
  JobSpec lenient = check_spec();
  lenient.slo.max_error_rate = 0.05;
  const auto few =
      fabricate(400, 4, 100, [](int i) { return i == 7 ? std::optional(Outcome::http_5xx) : std::nullopt; });
  const JudgedStep j = judge_step(lenient, order_at(4), few);
  CHECK_FALSE(j.outcome.unavailable);
  CHECK(j.outcome.verdict == Verdict::pass);
}

TEST_CASE("step judge: a step with no successful request never passes, whatever the bounds allow") {
  JobSpec anything = check_spec();
  anything.slo.latency.clear();
  anything.slo.max_error_rate = 1.0;
  const auto dead = fabricate(50, 5, 100, [](int) { return std::optional(Outcome::timeout); });
  // At a fixed rate the completion shortfall says saturation (timeouts are load)...
  const JudgedStep at_rate = judge_step(anything, order_at(5), dead);
  CHECK(at_rate.outcome.verdict == Verdict::fail);
  CHECK(at_rate.outcome.limiting_metric == "saturation");
  // ...and where no saturation witness applies (an all-at-once burst), the errors do.
  const JudgedStep burst = judge_step(anything, order_at(std::numeric_limits<double>::infinity()), dead);
  CHECK(burst.outcome.verdict == Verdict::fail);
  CHECK(burst.outcome.limiting_metric == "error_rate");
}

#include "core/slo.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

// A step of n successful requests whose TTFT is `ttft(i)` ms and ITL a fixed 20 ms.
template <class F>
StepMetrics step_with_ttfts(int n, F ttft, double duration_s = 100) {
  StepWindow w{0s, Nanos(static_cast<Nanos::rep>(duration_s * 1e9)), Nanos(static_cast<Nanos::rep>(duration_s * 1e9)),
               n / duration_s};
  StepAccumulator acc(w);
  for (int i = 0; i < n; ++i) {
    RequestRecord r;
    r.scheduled = r.dispatched = r.sent = Nanos(static_cast<Nanos::rep>(i * duration_s / n * 1e9 * 0.5));
    const Nanos first = r.scheduled + Nanos(static_cast<Nanos::rep>(ttft(i) * 1e6));
    r.chunks = {{first, 1}, {first + 20ms, 1}, {first + 40ms, 1}};
    r.output_tokens = 3;
    acc.add(r);
  }
  return std::move(acc).finish();
}

}  // namespace

TEST_CASE("the SLO of the design's example parses") {
  auto slo = parse_slo(json::parse(R"({"ttft_ms": {"p95": 800}, "itl_ms": {"p95": 50},
      "max_error_rate": 0.001, "goodput": {"ttft_ms": 800, "tpot_ms": 50}, "min_goodput_rps": 9.5})"))
                 .value();
  REQUIRE(slo.latency.size() == 2);  // in key order: itl_ms, ttft_ms
  CHECK(slo.latency[0].metric == LatencyMetric::itl);
  CHECK(slo.latency[0].bound_ms == 50);
  CHECK(slo.latency[1].metric == LatencyMetric::ttft);
  CHECK(*slo.latency[1].percentile == 95);
  CHECK(slo.latency[1].bound_ms == 800);
  CHECK(*slo.max_error_rate == 0.001);
  CHECK(*slo.min_goodput_rps == 9.5);
  CHECK(*slo.goodput.ttft == 800ms);
  CHECK(*slo.goodput.tpot == 50ms);
  CHECK_FALSE(slo.goodput.e2el.has_value());
  CHECK_FALSE(slo.goodput.ttft_sent.has_value());
  const auto vllm = parse_slo(json::parse(R"({"goodput": {"ttft_sent_ms": 300, "e2el_sent_ms": 2000}})")).value();
  CHECK(*vllm.goodput.ttft_sent == 300ms);
  CHECK(*vllm.goodput.e2el_sent == 2000ms);
  CHECK_FALSE(vllm.goodput.ttft.has_value());
  CHECK(slo.confidence == 0.95);
}

TEST_CASE("SLO bounds accept mean - median and fractional percentiles") {
  auto slo = parse_slo(json::parse(R"({"e2el_ms": {"mean": 3000, "median": 2500, "p99.9": 9000},
      "confidence": 0.9})"))
                 .value();
  REQUIRE(slo.latency.size() == 3);
  int means = 0;
  for (const auto& b : slo.latency) {
    if (!b.percentile)
      ++means;
    else
      CHECK((*b.percentile == 50 || *b.percentile == 99.9));
  }
  CHECK(means == 1);
  CHECK(slo.confidence == 0.9);
}

TEST_CASE("SLO errors name the field") {
  const std::vector<std::pair<std::string, std::string>> cases{
      {R"([])", "/slo"},
      {R"({"ttft": {"p95": 800}})", "/slo/ttft"},
      {R"({"ttft_ms": 800})", "/slo/ttft_ms"},
      {R"({"ttft_ms": {}})", "/slo/ttft_ms"},
      {R"({"ttft_ms": {"p95": -1}})", "/slo/ttft_ms/p95"},
      {R"({"ttft_ms": {"p95": "800"}})", "/slo/ttft_ms/p95"},
      {R"({"ttft_ms": {"p100": 800}})", "/slo/ttft_ms/p100"},
      {R"({"ttft_ms": {"p0": 800}})", "/slo/ttft_ms/p0"},
      {R"({"ttft_ms": {"q95": 800}})", "/slo/ttft_ms/q95"},
      {R"({"ttft_ms": {"p95x": 800}})", "/slo/ttft_ms/p95x"},
      {R"({"max_error_rate": 1.5})", "/slo/max_error_rate"},
      {R"({"max_error_rate": -0.1})", "/slo/max_error_rate"},
      {R"({"min_goodput_rps": -1})", "/slo/min_goodput_rps"},
      {R"({"confidence": 1})", "/slo/confidence"},
      {R"({"confidence": 0.2})", "/slo/confidence"},
      {R"({"goodput": {"ttft_ms": 0}})", "/slo/goodput/ttft_ms"},
      {R"({"goodput": {"itl_ms": 50}})", "/slo/goodput/itl_ms"},
      {R"({"goodput": {"ttft_sent_ms": -5}})", "/slo/goodput/ttft_sent_ms"},
      {R"({"goodput": {"e2el_sent": 5}})", "/slo/goodput/e2el_sent"},
      {R"({"goodput": 5})", "/slo/goodput"},
  };
  for (const auto& [text, field] : cases) {
    INFO(text);
    auto r = parse_slo(json::parse(text));
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == field);
    CHECK(r.error().code == errc::invalid_argument);
  }
}

TEST_CASE("a percentile criterion passes only when its whole interval is within the bound") {
  SloSpec slo;
  slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  // 1000 requests with TTFT 100..599 ms: p95 ~575, far below 800 -> pass.
  auto fast = evaluate_slo(slo, step_with_ttfts(1000, [](int i) { return 100 + i % 500; }));
  CHECK(fast.verdict == Verdict::pass);
  CHECK(fast.criteria[0].measured == Approx(574.05));
  CHECK(fast.criteria[0].ci_upper <= 800);
  CHECK(fast.criteria[0].ci_lower <= fast.criteria[0].measured);
  // TTFT 600..1599 ms: p95 ~1550 -> fail.
  auto slow = evaluate_slo(slo, step_with_ttfts(1000, [](int i) { return 600 + i; }));
  CHECK(slow.verdict == Verdict::fail);
  CHECK(slow.criteria[0].ci_lower > 800);
  CHECK(slow.limiting()->name == "p95_ttft_ms");
}

TEST_CASE("few samples make a percentile criterion inconclusive - not a coin toss") {
  SloSpec slo;
  slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  // 40 fast requests: the point estimate passes easily, but 40 samples cannot bound a p95.
  auto ev = evaluate_slo(slo, step_with_ttfts(40, [](int) { return 100.0; }));
  CHECK(ev.criteria[0].measured == Approx(100));
  CHECK(std::isinf(ev.criteria[0].ci_upper));
  CHECK(ev.verdict == Verdict::inconclusive);
  // A bound near the measured value on many samples is inconclusive too.
  auto near = evaluate_slo(slo, step_with_ttfts(300, [](int i) { return 700.0 + i; }));
  // p95 = 700 + 284.05; bound 985 lies in its interval.
  SloSpec tight;
  tight.latency.push_back({LatencyMetric::ttft, 95.0, 985});
  CHECK(evaluate_slo(tight, step_with_ttfts(300, [](int i) { return 700.0 + i; })).verdict == Verdict::inconclusive);
  CHECK(near.verdict == Verdict::fail);
}

TEST_CASE("error rate and goodput floors are judged on their measured values") {
  SloSpec slo;
  slo.max_error_rate = 0.01;
  slo.min_goodput_rps = 5;
  auto m = step_with_ttfts(
      1000, [](int) { return 50.0; }, 100);  // 10 good/s over 100 s
  auto ev = evaluate_slo(slo, m);
  CHECK(ev.criteria[0].name == "error_rate");
  CHECK(ev.criteria[0].verdict == Verdict::pass);
  CHECK(ev.criteria[1].name == "request_goodput");
  CHECK(ev.criteria[1].measured == Approx(10));
  CHECK(ev.criteria[1].verdict == Verdict::pass);
  slo.min_goodput_rps = 20;
  auto short_of = evaluate_slo(slo, m);
  CHECK(short_of.criteria[1].verdict == Verdict::fail);
  CHECK(short_of.verdict == Verdict::fail);
  CHECK(short_of.limiting()->name == "request_goodput");
}

TEST_CASE("a mean criterion uses a normal interval") {
  SloSpec slo;
  slo.latency.push_back({LatencyMetric::itl, std::nullopt, 25});
  auto ev = evaluate_slo(slo, step_with_ttfts(500, [](int) { return 100.0; }));
  CHECK(ev.criteria[0].name == "mean_itl_ms");
  CHECK(ev.criteria[0].measured == Approx(20));
  CHECK(ev.verdict == Verdict::pass);
  slo.latency[0].bound_ms = 15;
  CHECK(evaluate_slo(slo, step_with_ttfts(500, [](int) { return 100.0; })).verdict == Verdict::fail);
}

TEST_CASE("incomplete requests past a bound count against it") {
  StepWindow w{0s, 100s, 130s, 10.0};
  StepAccumulator acc(w);
  for (int i = 0; i < 1000; ++i) {
    RequestRecord r;
    r.scheduled = r.dispatched = r.sent = 10ms * i;
    if (i % 10 == 0) {  // every tenth request never answers: 10% stuck past any bound
      r.outcome = Outcome::incomplete;
    } else {
      r.chunks = {{r.scheduled + 100ms, 1}, {r.scheduled + 120ms, 1}};
      r.output_tokens = 2;
    }
    acc.add(r);
  }
  auto m = std::move(acc).finish();
  SloSpec slo;
  slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  slo.latency.push_back({LatencyMetric::itl, 95.0, 800});  // ITL cannot see stuck requests
  auto ev = evaluate_slo(slo, m);
  CHECK(m.ttft_ms.percentile(95) == Approx(100));  // the reported p95 over completed requests
  CHECK(ev.criteria[0].samples == 1000);
  CHECK(std::isinf(ev.criteria[0].measured));
  CHECK(ev.criteria[0].verdict == Verdict::fail);
  CHECK(ev.criteria[1].verdict == Verdict::pass);
  CHECK(ev.verdict == Verdict::fail);
}

TEST_CASE("a generator-limited step never passes") {
  SloSpec slo;
  slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  auto m = step_with_ttfts(1000, [](int) { return 100.0; });
  CHECK(evaluate_slo(slo, m, false).verdict == Verdict::pass);
  auto limited = evaluate_slo(slo, m, true);
  CHECK(limited.verdict == Verdict::inconclusive);
  CHECK(limited.to_json().at("generator_limited") == true);
}

TEST_CASE("an evaluation serialises with verdicts and nulls for infinities") {
  SloSpec slo;
  slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  auto j = evaluate_slo(slo, step_with_ttfts(40, [](int) { return 100.0; })).to_json();
  CHECK(j.at("verdict") == "inconclusive");
  CHECK(j.at("limiting_metric") == "p95_ttft_ms");
  CHECK(j.at("criteria")[0].at("ci_upper").is_null());
  CHECK(j.at("criteria")[0].at("comparison") == "<=");
  CHECK(
      evaluate_slo(SloSpec{}, step_with_ttfts(10, [](int) { return 1.0; })).to_json().at("limiting_metric").is_null());
}

TEST_CASE("slo: samples_needed agrees with the interval the verdict uses") {
  SloSpec slo;
  CHECK(samples_needed(slo).sized == 0);  // no percentile bound: no need
  slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  slo.latency.push_back({LatencyMetric::itl, std::nullopt, 50});  // a mean needs no count
  const auto need = samples_needed(slo);
  REQUIRE(need.decidable > 1);
  // With every sample under the bound, `decidable` samples can pass and one fewer cannot.
  auto upper_with = [&](std::uint64_t n) {
    SampleSet s;
    for (std::uint64_t i = 0; i < n; ++i) s.add(10.0 + static_cast<double>(i % 7));
    return s.percentile_interval(95, slo.confidence).upper;
  };
  CHECK(std::isfinite(upper_with(need.decidable)));
  CHECK(std::isinf(upper_with(need.decidable - 1)));
  // `sized` leaves room for half the tail the percentile allows.
  const auto r = percentile_rank_interval(need.sized, 95, slo.confidence);
  const double allowed = static_cast<double>(need.sized) - 1 - static_cast<double>(r.upper);
  CHECK(allowed >= 0.025 * static_cast<double>(need.sized));
  // A higher percentile needs more.
  SloSpec p99;
  p99.latency.push_back({LatencyMetric::ttft, 99.0, 800});
  CHECK(samples_needed(p99).sized > need.sized);
  CHECK(samples_needed(p99).percentile_name == "p99_ttft_ms");
}

TEST_CASE("ttfo_ms bounds the first visible token: parsed, judged apart from TTFT, described") {
  auto slo = parse_slo(json{{"ttfo_ms", {{"p95", 900}}}, {"ttft_ms", {{"p95", 800}}}}, "/slo").value();
  REQUIRE(slo.latency.size() == 2);
  const bool has_ttfo = std::any_of(slo.latency.begin(), slo.latency.end(),
                                    [](const LatencyBound& b) { return b.metric == LatencyMetric::ttfo; });
  CHECK(has_ttfo);
  CHECK(to_string(LatencyMetric::ttfo) == "ttfo_ms");
  // 1000 requests whose first token comes after 100..599 ms and whose first visible token
  // 600 ms later (reasoning): TTFT passes, TTFO fails and limits.
  StepWindow w{0s, 100s, 100s, 10};
  StepAccumulator acc(w);
  for (int i = 0; i < 1000; ++i) {
    RequestRecord r;
    r.scheduled = r.dispatched = r.sent = 50ms * i;
    const Nanos first = r.scheduled + 1ms * (100 + i % 500);
    r.chunks = {{first, 1, true}, {first + 600ms, 1, false}, {first + 620ms, 1, false}};
    r.output_tokens = 3;
    r.reasoning_tokens = 1;
    acc.add(r);
  }
  const auto e = evaluate_slo(slo, std::move(acc).finish());
  CHECK(e.verdict == Verdict::fail);
  CHECK(e.limiting()->name == "p95_ttfo_ms");
  CHECK(describe_slo(json{{"ttfo_ms", {{"p95", 900}}}}) == "TTFO p95 \u2264 900 ms");
  // Its error paths are every latency bound's.
  CHECK(parse_slo(json{{"ttfo_ms", {{"p95", -1}}}}, "/slo").error().field == "/slo/ttfo_ms/p95");
  CHECK(parse_slo(json{{"ttfo_ms", 5}}, "/slo").error().field == "/slo/ttfo_ms");
}

TEST_CASE("users who gave up waiting count against a TTFT bound their wait exceeded, never for it") {
  // 10% of the users give up after 1 s without a first token: a server that never answers
  // them must not look fast because their requests leave the percentiles.
  const auto step = [](double patience_s) {
    StepAccumulator acc(StepWindow{0s, 100s, 130s, 10.0});
    for (int i = 0; i < 1000; ++i) {
      RequestRecord r;
      r.scheduled = r.dispatched = r.sent = 10ms * i;
      if (i % 10 == 0) {
        r.outcome = Outcome::abandoned;
        r.finished = r.scheduled + Nanos(static_cast<Nanos::rep>(patience_s * 1e9));
      } else {
        r.chunks = {{r.scheduled + 100ms, 1}, {r.scheduled + 120ms, 1}};
        r.output_tokens = 2;
      }
      acc.add(r);
    }
    return std::move(acc).finish();
  };
  SloSpec slo;
  slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  const auto impatient = evaluate_slo(slo, step(1.0));  // waited 1 s > 800 ms: above the bound
  CHECK(impatient.verdict == Verdict::fail);
  CHECK(std::isinf(impatient.criteria[0].measured));
  const auto quick = evaluate_slo(slo, step(0.5));  // gave up at 500 ms: says nothing past 800
  CHECK(quick.criteria[0].measured == Approx(100));
  CHECK(quick.verdict == Verdict::pass);
  CHECK(step(1.0).error_rate() == 0);
}

// A step built by hand: fourteen requests with known timestamps whose every metric was
// computed on paper (numpy-style linear-interpolation percentiles). Times are in ms from the
// step's origin; warm-up ends at 1000, the measured window is [1000, 11000), drain ends 13000.
//
//  req  sched  sent  chunks (arrival:tokens)         in  out  outcome     notes
//  R0    500    500  700 740 780                     100  3   ok          warm-up, done before window
//  R1    900    900  1100 1200 1300                  100  3   ok          warm-up, finishes in window
//  R2   1000   1000  1200 1240 1280 1320 1360         50  5   ok          good
//  R3   2000   2002  2250 2310:2 2370                 60  4   ok          lag 2, two-token chunk, good
//  R4   3000   3000  3400                             70  1   ok          one token: no TPOT/ITL; TTFT 400 not good
//  R5   4000   4001  -                                80  -   http_5xx    lag 1
//  R6   5000   5000  5100 5150 5200 5250              90  4   ok          TPOT 50 == bound: good (inclusive)
//  R7   6000   6001  6300 6380 6460                  100  3   ok          lag 1, TPOT 80: not good
//  R8   7000   7000  7150 7200                       110  2   ok          output estimated, good
//  R9   8000   8000  8100 8150                        20  -   stream_error
//  R10  9000   9000  9200 10000 11100                 40  3   ok          finishes after the window, TPOT 950
//  R11 10000  10000  10500                            30  -   incomplete  E2EL >= 3000
//  R12 10500  10520  -                                30  -   incomplete  dispatched 10500: queued 20; TTFT,E2EL >=
//  2500 R13 11000  11000  11100                            10  1   ok          scheduled at window end: not measured

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/metrics.hpp"
#include "core/slo.hpp"

using namespace capsweep;
using namespace std::chrono_literals;

namespace {

RequestRecord req(int sched, int dispatched, int sent, std::vector<std::pair<int, unsigned>> chunks, unsigned in,
                  unsigned out, Outcome outcome = Outcome::ok) {
  RequestRecord r;
  r.scheduled = Nanos(std::chrono::milliseconds(sched));
  r.dispatched = Nanos(std::chrono::milliseconds(dispatched));
  r.sent = Nanos(std::chrono::milliseconds(sent));
  for (auto [t, k] : chunks) r.chunks.push_back({Nanos(std::chrono::milliseconds(t)), k});
  r.input_tokens = in;
  r.output_tokens = out;
  r.outcome = outcome;
  return r;
}

StepMetrics golden_step() {
  StepWindow w;
  w.warmup = 1000ms;
  w.end = 11000ms;
  w.drain_end = 13000ms;
  w.offered_rate_rps = 1.0;
  GoodputBounds g;
  g.ttft = 300ms;
  g.tpot = 50ms;
  StepAccumulator acc(w, g);
  std::vector<RequestRecord> rs;
  rs.push_back(req(500, 500, 500, {{700, 1}, {740, 1}, {780, 1}}, 100, 3));
  rs.push_back(req(900, 900, 900, {{1100, 1}, {1200, 1}, {1300, 1}}, 100, 3));
  rs.push_back(req(1000, 1000, 1000, {{1200, 1}, {1240, 1}, {1280, 1}, {1320, 1}, {1360, 1}}, 50, 5));
  rs.push_back(req(2000, 2002, 2002, {{2250, 1}, {2310, 2}, {2370, 1}}, 60, 4));
  rs.push_back(req(3000, 3000, 3000, {{3400, 1}}, 70, 1));
  rs.push_back(req(4000, 4001, 4001, {}, 80, 0, Outcome::http_5xx));
  rs.push_back(req(5000, 5000, 5000, {{5100, 1}, {5150, 1}, {5200, 1}, {5250, 1}}, 90, 4));
  rs.push_back(req(6000, 6001, 6001, {{6300, 1}, {6380, 1}, {6460, 1}}, 100, 3));
  auto r8 = req(7000, 7000, 7000, {{7150, 1}, {7200, 1}}, 110, 2);
  r8.output_tokens_estimated = true;
  rs.push_back(r8);
  rs.push_back(req(8000, 8000, 8000, {{8100, 1}, {8150, 1}}, 20, 0, Outcome::stream_error));
  rs.push_back(req(9000, 9000, 9000, {{9200, 1}, {10000, 1}, {11100, 1}}, 40, 3));
  rs.push_back(req(10000, 10000, 10000, {{10500, 1}}, 30, 0, Outcome::incomplete));
  rs.push_back(req(10500, 10500, 10520, {}, 30, 0, Outcome::incomplete));
  rs.push_back(req(11000, 11000, 11000, {{11100, 1}}, 10, 1));
  // Records arrive in completion order, not schedule order: the result must not care.
  std::reverse(rs.begin(), rs.end());
  for (const auto& r : rs) acc.add(r);
  return std::move(acc).finish();
}

}  // namespace

TEST_CASE("golden step: counts - tokens and rates") {
  const StepMetrics m = golden_step();
  CHECK(m.measured == 11);  // R2..R12
  CHECK(m.completed == 7);  // R2 R3 R4 R6 R7 R8 R10
  CHECK(m.failed() == 4);
  CHECK(m.good == 4);  // R2 R3 R6 R8
  CHECK(m.error_rate() == Approx(4.0 / 11));
  CHECK(m.goodput_attainment() == Approx(4.0 / 11));
  CHECK(m.outcomes[size_t(Outcome::http_5xx)] == 1);
  CHECK(m.outcomes[size_t(Outcome::stream_error)] == 1);
  CHECK(m.outcomes[size_t(Outcome::incomplete)] == 2);
  CHECK(m.output_tokens_estimated == 1);
  CHECK(m.total_input_tokens == 520);  // 50+60+70+90+100+110+40
  CHECK(m.total_output_tokens == 22);  // 5+4+1+4+3+2+3
  CHECK(m.duration_s() == Approx(10.0));
  // Completions in [1000, 11000): R1 R2 R3 R4 R6 R7 R8 (R0 before, R10 and R13 after).
  CHECK(m.completions_in_window == 7);
  CHECK(m.request_throughput() == Approx(0.7));
  // Tokens in window of successful and incomplete requests: R1 3 + R2 5 + R3 4 + R4 1 + R6 4
  // + R7 3 + R8 2 + R10 2 + R11 1 = 25 (R9's stream failed: its 2 tokens do not count).
  CHECK(m.output_tokens_in_window == 25);
  CHECK(m.output_throughput() == Approx(2.5));
  // Prompts of the completions in the window: 100+50+60+70+90+100+110 = 580.
  CHECK(m.total_token_throughput() == Approx(60.5));
  CHECK(m.request_goodput() == Approx(0.4));
  CHECK(m.achieved_rate_rps() == Approx(1.1));  // 11 measured requests sent in 10 s
}

TEST_CASE("golden step: latency distributions") {
  const StepMetrics m = golden_step();
  // TTFT from schedule: 100 150 200 200 250 300 400
  CHECK(m.ttft_ms.count() == 7);
  CHECK(m.ttft_ms.mean() == Approx(1600.0 / 7));
  CHECK(m.ttft_ms.percentile(50) == Approx(200));
  CHECK(m.ttft_ms.percentile(90) == Approx(340));
  CHECK(m.ttft_ms.percentile(95) == Approx(370));
  CHECK(m.ttft_ms.percentile(99) == Approx(394));
  CHECK(m.ttft_ms.stddev() == Approx(92.0290).epsilon(1e-5));
  // TTFT from sending: 100 150 200 200 248 299 400
  CHECK(m.ttft_sent_ms.percentile(95) == Approx(369.7));
  // E2EL: 200 250 360 370 400 460 2100
  CHECK(m.e2el_ms.mean() == Approx(4140.0 / 7));
  CHECK(m.e2el_ms.percentile(50) == Approx(370));
  CHECK(m.e2el_ms.percentile(95) == Approx(1608));
  CHECK(m.e2el_ms.percentile(99) == Approx(2001.6));
  CHECK(m.e2el_sent_ms.percentile(50) == Approx(368));  // R3: 2370 - 2002
  // TPOT: 40 40 50 50 80 950 (R4 has one token)
  CHECK(m.tpot_ms.count() == 6);
  CHECK(m.tpot_ms.mean() == Approx(1210.0 / 6));
  CHECK(m.tpot_ms.percentile(50) == Approx(50));
  CHECK(m.tpot_ms.percentile(95) == Approx(732.5));
  // ITL, one sample per token gap: 30 30 40 40 40 40 50 50 50 50 60 80 80 800 1100
  CHECK(m.itl_ms.count() == 15);
  CHECK(m.itl_ms.mean() == Approx(2540.0 / 15));
  CHECK(m.itl_ms.percentile(50) == Approx(50));
  CHECK(m.itl_ms.percentile(90) == Approx(512));
  CHECK(m.itl_ms.percentile(99) == Approx(1058));
  CHECK(m.itl_ms.min() == Approx(30));
  // Schedule lag over 11 measured requests: 0 x8, 1, 1, 2
  CHECK(m.schedule_lag_ms.count() == 11);
  CHECK(m.schedule_lag_ms.percentile(50) == Approx(0).margin(1e-12));
  CHECK(m.schedule_lag_ms.percentile(99) == Approx(1.9));
  CHECK(m.schedule_lag_ms.max() == Approx(2));
  // Client queue: 0 x10, 20 (R12)
  CHECK(m.client_queue_ms.mean() == Approx(20.0 / 11));
  CHECK(m.client_queue_ms.percentile(99) == Approx(18));
  // Incomplete: R11 (first token seen) and R12 (none), elapsed at drain end 3000 and 2500
  CHECK(m.incomplete_elapsed_ms == std::vector<double>{2500, 3000});
  CHECK(m.incomplete_without_first_token_ms == std::vector<double>{2500});
}

TEST_CASE("golden step: summary keys follow vLLM") {
  const auto s = golden_step().summary();
  CHECK(s.at("completed") == 7);
  CHECK(s.at("p95_ttft_ms").get<double>() == Approx(370));
  CHECK(s.at("median_e2el_ms").get<double>() == Approx(370));
  CHECK(s.at("mean_tpot_ms").get<double>() == Approx(1210.0 / 6));
  CHECK(s.at("p99.9_itl_ms").get<double>() == Approx(800 + 0.986 * 300));  // h = 13.986
  CHECK(s.at("p99_schedule_lag_ms").get<double>() == Approx(1.9));
  CHECK(s.at("request_goodput").get<double>() == Approx(0.4));
  CHECK(s.at("offered_rate_rps").get<double>() == Approx(1.0));
  CHECK(s.at("errors").at("incomplete") == 2);
  CHECK(s.at("errors").at("http_5xx") == 1);
  CHECK_FALSE(s.at("errors").contains("timeout"));
  CHECK(s.at("total_input_tokens") == 520);
}

TEST_CASE("golden step: SLO verdict") {
  const StepMetrics m = golden_step();
  SloSpec slo;
  slo.latency.push_back({LatencyMetric::ttft, 95.0, 800});
  slo.latency.push_back({LatencyMetric::ttft, 50.0, 1000});
  slo.max_error_rate = 0.001;
  const auto ev = evaluate_slo(slo, m);
  REQUIRE(ev.criteria.size() == 3);
  // p95 TTFT: R12 never produced a token and had waited 2500 > 800 ms, so it counts as a sample
  // above the bound: 8 samples, rank 6.65 falls beyond the data -> +inf. With 8 samples the 95%
  // interval of a p95 is [X(6), +inf) = [300, inf): the bound lies inside -> inconclusive.
  CHECK(ev.criteria[0].name == "p95_ttft_ms");
  CHECK(ev.criteria[0].samples == 8);
  CHECK(std::isinf(ev.criteria[0].measured));
  CHECK(ev.criteria[0].ci_lower == Approx(300));
  CHECK(ev.criteria[0].verdict == Verdict::inconclusive);
  // Median over the same 8: h = 3.5 -> (200 + 250) / 2 = 225. B ~ Binomial(8, 0.5):
  // P(B <= 0) = 1/256 <= 0.025 < P(B <= 1) = 9/256, so the lower end is X(1) = 100;
  // P(B <= 6) = 247/256 < 0.975 <= P(B <= 7), so the upper end is X(8) = the censored R12
  // (+inf). Even a median is inconclusive on 8 samples when one of them never answered.
  CHECK(ev.criteria[1].name == "p50_ttft_ms");
  CHECK(ev.criteria[1].measured == Approx(225));
  CHECK(ev.criteria[1].ci_lower == Approx(100));
  CHECK(std::isinf(ev.criteria[1].ci_upper));
  CHECK(ev.criteria[1].verdict == Verdict::inconclusive);
  CHECK(ev.criteria[2].name == "error_rate");
  CHECK(ev.criteria[2].verdict == Verdict::fail);
  CHECK(ev.verdict == Verdict::fail);
  REQUIRE(ev.limiting() != nullptr);
  CHECK(ev.limiting()->name == "error_rate");
}

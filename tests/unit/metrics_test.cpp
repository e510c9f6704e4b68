#include "core/metrics.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep;
using namespace std::chrono_literals;

namespace {

RequestRecord ok_request(Nanos scheduled, Nanos first, Nanos gap, int tokens) {
  RequestRecord r;
  r.scheduled = r.dispatched = r.sent = scheduled;
  for (int i = 0; i < tokens; ++i) r.chunks.push_back({first + gap * i, 1});
  r.input_tokens = 10;
  r.output_tokens = static_cast<std::uint32_t>(tokens);
  return r;
}

// Two summaries equal, numbers within a relative 1e-9 (means combine in another order).
void check_same(const nlohmann::json& a, const nlohmann::json& b, const std::string& at = "") {
  INFO(at);
  REQUIRE(a.type() == b.type());
  if (a.is_object()) {
    REQUIRE(a.size() == b.size());
    for (auto it = a.begin(); it != a.end(); ++it) {
      REQUIRE(b.contains(it.key()));
      check_same(it.value(), b.at(it.key()), at + "/" + it.key());
    }
  } else if (a.is_array()) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) check_same(a[i], b[i], at + "/" + std::to_string(i));
  } else if (a.is_number_float()) {
    CHECK(a.get<double>() == Approx(b.get<double>()).epsilon(1e-9).margin(1e-12));
  } else {
    CHECK(a == b);
  }
}

}  // namespace

TEST_CASE("percentile keys are written as vLLM writes them") {
  CHECK(percentile_key(95) == "p95");
  CHECK(percentile_key(50) == "p50");
  CHECK(percentile_key(99.9) == "p99.9");
  CHECK(percentile_key(99.99) == "p99.99");
}

TEST_CASE("warm-up excludes requests by scheduled time - not by completion") {
  StepAccumulator acc({5s, 10s, 12s, 1.0});
  acc.add(ok_request(4900ms, 5100ms, 10ms, 3));  // scheduled in warm-up, finishes after
  acc.add(ok_request(5000ms, 5200ms, 10ms, 3));  // scheduled at the warm-up's end: measured
  auto m = std::move(acc).finish();
  CHECK(m.measured == 1);
  CHECK(m.ttft_ms.count() == 1);
  CHECK(m.ttft_ms.mean() == Approx(200));
  CHECK(m.completions_in_window == 2);  // both finished inside the window
}

TEST_CASE("a chunk of k tokens gives k ITL samples of gap / k") {
  StepAccumulator acc({0s, 10s, 10s, 1.0});
  RequestRecord r = ok_request(0ms, 100ms, 0ms, 0);
  r.chunks = {{100ms, 1}, {140ms, 4}, {150ms, 1}};
  r.output_tokens = 6;
  acc.add(r);
  auto m = std::move(acc).finish();
  CHECK(m.itl_ms.count() == 5);
  CHECK(m.itl_ms.percentile(0) == Approx(10));
  CHECK(m.itl_ms.percentile(100) == Approx(10));
  CHECK(m.tpot_ms.mean() == Approx(10));  // (150 - 100) / (6 - 1)
  CHECK(m.output_tokens_in_window == 6);
}

TEST_CASE("a first chunk of several tokens adds no ITL samples") {
  StepAccumulator acc({0s, 10s, 10s, 1.0});
  RequestRecord r = ok_request(0ms, 100ms, 0ms, 0);
  r.chunks = {{100ms, 3}, {130ms, 1}};
  r.output_tokens = 4;
  acc.add(r);
  auto m = std::move(acc).finish();
  CHECK(m.itl_ms.count() == 1);
  CHECK(m.itl_ms.mean() == Approx(30));
  CHECK(m.tpot_ms.mean() == Approx(10));  // 30 / 3
}

TEST_CASE("a generator that falls behind never makes the server look faster") {
  // The same server behaviour (200 ms to first token after sending), once sent on time and
  // once 300 ms late: TTFT from the schedule includes the lag, TTFT from sending does not.
  StepAccumulator acc({0s, 10s, 10s, 1.0});
  RequestRecord late = ok_request(1000ms, 1500ms, 10ms, 2);
  late.dispatched = late.sent = 1300ms;
  acc.add(late);
  auto m = std::move(acc).finish();
  CHECK(m.ttft_ms.mean() == Approx(500));
  CHECK(m.ttft_sent_ms.mean() == Approx(200));
  CHECK(m.schedule_lag_ms.max() == Approx(300));
}

TEST_CASE("an ok outcome without content counts as an empty stream") {
  StepAccumulator acc({0s, 10s, 10s, 1.0});
  RequestRecord r;
  r.scheduled = r.dispatched = r.sent = 1s;
  acc.add(r);
  auto m = std::move(acc).finish();
  CHECK(m.completed == 0);
  CHECK(m.outcomes[size_t(Outcome::empty_stream)] == 1);
  CHECK(m.error_rate() == 1.0);
}

TEST_CASE("cancelled requests have no schedule lag and are not sent") {
  StepAccumulator acc({0s, 10s, 10s, 1.0});
  RequestRecord r;
  r.scheduled = 1s;
  r.outcome = Outcome::cancelled;
  acc.add(r);
  auto m = std::move(acc).finish();
  CHECK(m.measured == 1);
  CHECK(m.schedule_lag_ms.count() == 0);
  CHECK(m.sent_in_window == 0);
}

TEST_CASE("an open-ended window ends at the last token after warm-up") {
  StepWindow w;
  w.warmup = 0s;
  w.offered_rate_rps = std::numeric_limits<double>::infinity();
  StepAccumulator acc(w);
  for (int i = 0; i < 4; ++i) acc.add(ok_request(0ms, Nanos(std::chrono::milliseconds(100 * (i + 1))), 100ms, 11));
  auto m = std::move(acc).finish();
  // last token of the last request: 400 ms + 10 x 100 ms = 1.4 s
  CHECK(m.duration_s() == Approx(1.4));
  CHECK(m.request_throughput() == Approx(4 / 1.4));
  CHECK(m.output_throughput() == Approx(44 / 1.4));
  CHECK(m.summary().at("offered_rate_rps").is_null());
}

TEST_CASE("sessions: each turn's latencies and prompt lengths, and the request rate beside the session rate") {
  StepWindow w{1s, 11s, 11s, 2.0};
  w.sessions = true;
  auto turn = [](Nanos scheduled, Nanos ttft, int k, std::uint32_t prompt) {
    RequestRecord r = ok_request(scheduled, scheduled + ttft, 10ms, 4);
    r.turn = static_cast<std::uint16_t>(k);
    r.input_tokens = prompt;
    return r;
  };
  StepAccumulator a(w), b(w);
  // 20 sessions of 3 turns in the window; one more in the warm-up (not measured).
  for (int s = 0; s < 20; ++s) {
    const Nanos start = 1s + std::chrono::milliseconds(400 * s);
    StepAccumulator& acc = s % 2 ? a : b;  // two engine parts, merged
    acc.add(turn(start, 50ms, 1, 100));
    acc.add(turn(start + 200ms, 80ms, 2, 250));
    acc.add(turn(start + 400ms, 120ms, 3, 400));
  }
  a.add(turn(500ms, 50ms, 1, 100));
  RequestRecord failed = turn(2s, 10ms, 3, 400);
  failed.chunks.clear();
  failed.outcome = Outcome::http_5xx;
  b.add(failed);
  a.merge(std::move(b));
  const auto m = std::move(a).finish();
  REQUIRE(m.turns.size() == 3);
  CHECK(m.turns[0].completed == 20);
  CHECK(m.turns[2].measured == 21);
  CHECK(m.turns[2].completed == 20);
  CHECK(m.turns[1].ttft_ms.mean() == Approx(80));
  CHECK(m.turns[2].prompt_tokens.mean() == Approx(400));
  CHECK(m.turns[2].itl_ms.mean() == Approx(10));
  CHECK(m.offered_session_rate == Approx(2.0));
  CHECK(m.offered_rate_rps == Approx(61 / 10.0));  // the turns scheduled in the window
  const auto j = m.summary();
  REQUIRE(j.at("turns").size() == 3);
  CHECK(j["turns"][0]["turn"] == 1);
  CHECK(j["turns"][1]["mean_ttft_ms"].get<double>() == Approx(80));
  CHECK(j["turns"][2]["max_prompt_tokens"].get<double>() == Approx(400));
  // A step of no session has no turns in its summary.
  StepAccumulator plain({0s, 10s, 10s, 1.0});
  plain.add(ok_request(1s, 1100ms, 10ms, 3));
  CHECK_FALSE(std::move(plain).finish().summary().contains("turns"));
}

TEST_CASE("goodput bounds are inclusive and TPOT-free for one-token requests") {
  GoodputBounds b;
  b.ttft = 200ms;
  b.tpot = 10ms;
  b.e2el = 300ms;
  RequestRecord exact = ok_request(0ms, 200ms, 10ms, 11);  // TTFT 200, TPOT 10, E2EL 300
  CHECK(StepAccumulator::is_good(exact, b));
  RequestRecord slow_first = ok_request(0ms, 201ms, 5ms, 2);
  CHECK_FALSE(StepAccumulator::is_good(slow_first, b));
  RequestRecord slow_tokens = ok_request(0ms, 100ms, 11ms, 3);
  CHECK_FALSE(StepAccumulator::is_good(slow_tokens, b));
  RequestRecord long_total = ok_request(0ms, 100ms, 10ms, 22);  // E2EL 310
  CHECK_FALSE(StepAccumulator::is_good(long_total, b));
  RequestRecord one_token = ok_request(0ms, 150ms, 0ms, 1);
  CHECK(StepAccumulator::is_good(one_token, b));
  RequestRecord failed = exact;
  failed.outcome = Outcome::http_5xx;
  CHECK_FALSE(StepAccumulator::is_good(failed, b));
  CHECK(StepAccumulator::is_good(slow_first, GoodputBounds{}));  // no bounds: success is good
}

TEST_CASE("goodput from the send (vLLM's definition) ignores the client's queue - from the schedule counts it") {
  // Scheduled at 0, sent at 300 ms (a late generator or a concurrency cap), first token at
  // 500 ms, last at 600 ms: TTFT 500 ms from the schedule, 200 ms from the send.
  RequestRecord r = ok_request(0ms, 500ms, 10ms, 11);
  r.dispatched = r.sent = 300ms;
  GoodputBounds sent;
  sent.ttft_sent = 250ms;
  sent.e2el_sent = 300ms;
  CHECK(StepAccumulator::is_good(r, sent));
  GoodputBounds scheduled;
  scheduled.ttft = 250ms;
  CHECK_FALSE(StepAccumulator::is_good(r, scheduled));
  sent.ttft_sent = 199ms;
  CHECK_FALSE(StepAccumulator::is_good(r, sent));
  sent.ttft_sent = 200ms;
  sent.e2el_sent = 299ms;  // E2EL from the send is 300 ms
  CHECK_FALSE(StepAccumulator::is_good(r, sent));
}

TEST_CASE("a saturated step's throughput counts completions inside the window only") {
  // Offered 10/s for 10 s, but the server completes one request every 200 ms (5/s): the
  // rest finish during the drain. Request throughput must say 5/s, not 10/s.
  StepAccumulator acc({0s, 10s, 30s, 10.0});
  for (int i = 0; i < 100; ++i) {
    const Nanos sched = 100ms * i;
    const Nanos done = 200ms * (i + 1);
    RequestRecord r;
    r.scheduled = r.dispatched = r.sent = sched;
    r.chunks = {{done - 1ms, 1}, {done, 1}};
    r.output_tokens = 2;
    acc.add(r);
  }
  auto m = std::move(acc).finish();
  CHECK(m.completed == 100);
  CHECK(m.request_throughput() == Approx(4.9));  // 49 completions before 10 s
  CHECK(m.achieved_rate_rps() == Approx(10));
  CHECK(m.offered_rate_rps == 10);
}

TEST_CASE("summary carries every vLLM key for each latency metric") {
  StepAccumulator acc({0s, 10s, 10s, 2.0});
  acc.add(ok_request(0ms, 100ms, 10ms, 5));
  auto s = std::move(acc).finish().summary({50, 99.9});
  for (const char* metric : {"ttft", "tpot", "itl", "e2el", "ttft_sent", "e2el_sent"}) {
    for (const char* stat : {"mean", "median", "std", "p50", "p99.9"}) {
      const std::string key = std::string(stat) + "_" + metric + "_ms";
      INFO(key);
      CHECK(s.contains(key));
    }
  }
  CHECK_FALSE(s.contains("p95_ttft_ms"));  // only the percentiles asked for
  for (const char* key :
       {"request_throughput", "output_throughput", "request_goodput", "completed", "total_input_tokens",
        "total_output_tokens", "duration_s", "offered_rate_rps", "achieved_rate_rps", "p99_schedule_lag_ms"}) {
    INFO(key);
    CHECK(s.contains(key));
  }
}

TEST_CASE("accumulators of a step's parts merged are the one accumulator of the whole step") {
  const StepWindow window{1s, 5s, 8s, 100.0};
  GoodputBounds bounds;
  bounds.ttft = 150ms;
  StepAccumulator whole(window, bounds), part0(window, bounds), part1(window, bounds);
  for (int j = 0; j < 500; ++j) {
    const Nanos scheduled = 10ms * j;
    RequestRecord r = ok_request(scheduled, scheduled + 100ms + 1ms * (j % 90), 3ms, 2 + j % 5);
    if (j % 17 == 0) r.outcome = Outcome::http_5xx, r.chunks.clear();
    if (j % 29 == 0) r.outcome = Outcome::incomplete;
    whole.add(r);
    (j % 2 == 0 ? part0 : part1).add(r);
  }
  part0.merge(std::move(part1));
  const auto a = std::move(part0).finish(), b = std::move(whole).finish();
  check_same(a.summary(), b.summary());
  CHECK(a.measured == b.measured);
  CHECK(a.good == b.good);
  CHECK(a.incomplete_elapsed_ms.size() == b.incomplete_elapsed_ms.size());
  CHECK(a.window_end == b.window_end);
}

TEST_CASE("an open window merged over parts ends at the latest event of any part") {
  const StepWindow window{0s, std::nullopt, 60s, 0};
  StepAccumulator p0(window), p1(window);
  p0.add(ok_request(0ms, 100ms, 10ms, 3));
  p1.add(ok_request(0ms, 900ms, 10ms, 3));
  p0.merge(std::move(p1));
  const auto m = std::move(p0).finish();
  CHECK(m.window_end == 920ms);
  CHECK(m.completed == 2);
}

TEST_CASE("a reasoning request: TTFO at its first visible token, reasoning counted, ITL within each phase") {
  StepAccumulator acc({0s, 10s, 12s, 1.0});
  RequestRecord r;
  r.scheduled = r.dispatched = r.sent = 0ms;
  // 3 reasoning chunks every 10 ms from 100 ms, then 2 visible chunks every 20 ms from 150 ms.
  for (int i = 0; i < 3; ++i) r.chunks.push_back({100ms + 10ms * i, 1, true});
  for (int i = 0; i < 2; ++i) r.chunks.push_back({150ms + 20ms * i, 1, false});
  r.output_tokens = 5;
  r.reasoning_tokens = 3;
  acc.add(r);
  acc.add(ok_request(0ms, 50ms, 10ms, 3));  // a plain request: TTFO = TTFT
  const auto m = std::move(acc).finish();
  REQUIRE(m.ttfo_ms.count() == 2);
  CHECK(m.ttfo_ms.max() == Approx(150));
  CHECK(m.ttfo_ms.min() == Approx(50));
  CHECK(m.ttft_ms.max() == Approx(100));
  CHECK(m.requests_with_reasoning == 1);
  CHECK(m.total_reasoning_tokens == 3);
  REQUIRE(m.itl_reasoning_ms.count() == 2);
  CHECK(m.itl_reasoning_ms.mean() == Approx(10));
  REQUIRE(m.itl_output_ms.count() == 1);  // 150 -> 170; the 120 -> 150 hand-over is neither's
  CHECK(m.itl_output_ms.mean() == Approx(20));
  CHECK(m.itl_ms.count() == 4 + 2);  // the pooled ITL keeps every gap
  const auto j = m.summary();
  CHECK(j.at("total_reasoning_tokens") == 3);
  CHECK(j.at("total_visible_tokens") == 5);  // 2 of the reasoning request + 3 of the plain one
  CHECK(j.at("p50_ttfo_ms").get<double>() == Approx(100));
  CHECK(j.contains("p95_itl_reasoning_ms"));
  CHECK(j.contains("p95_itl_output_ms"));
}

TEST_CASE("a summary without reasoning states zero reasoning and TTFO equal to TTFT") {
  StepAccumulator acc({0s, 10s, 12s, 1.0});
  acc.add(ok_request(0ms, 80ms, 10ms, 3));
  const auto j = std::move(acc).finish().summary();
  CHECK(j.at("requests_with_reasoning") == 0);
  CHECK(j.at("total_reasoning_tokens") == 0);
  CHECK(j.at("p95_ttfo_ms").get<double>() == Approx(j.at("p95_ttft_ms").get<double>()));
  CHECK_FALSE(j.contains("p95_itl_reasoning_ms"));
}

TEST_CASE("an incomplete request that only reasoned is censored for TTFO, not for TTFT") {
  StepAccumulator acc({0s, 10s, 12s, 1.0});
  RequestRecord r;
  r.scheduled = r.dispatched = r.sent = 1s;
  r.chunks.push_back({1100ms, 1, true});
  r.outcome = Outcome::incomplete;
  acc.add(r);
  const auto m = std::move(acc).finish();
  CHECK(m.incomplete_without_first_token_ms.empty());
  REQUIRE(m.incomplete_without_first_output_ms.size() == 1);
  CHECK(m.incomplete_without_first_output_ms[0] == Approx(11000));
}

TEST_CASE("abandoned requests are their own outcome: no error, no latency sample, in goodput's denominator") {
  StepAccumulator acc({0s, 10s, 12s, 1.0});
  acc.add(ok_request(0ms, 100ms, 10ms, 3));
  RequestRecord waited;  // gave up after 2 s without a first token
  waited.scheduled = waited.dispatched = waited.sent = 1s;
  waited.finished = 3s;
  waited.outcome = Outcome::abandoned;
  acc.add(waited);
  RequestRecord cut = ok_request(2s, 2100ms, 10ms, 4);  // read 4 tokens, then closed
  cut.finished = 2130ms;
  cut.outcome = Outcome::abandoned;
  acc.add(cut);
  const auto m = std::move(acc).finish();
  CHECK(m.measured == 3);
  CHECK(m.completed == 1);
  CHECK(m.abandoned() == 2);
  CHECK(m.failed() == 0);
  CHECK(m.error_rate() == 0);
  CHECK(m.ttft_ms.count() == 1);  // only the completed request's
  CHECK(m.goodput_attainment() == Approx(1.0 / 3));
  // Their waits are lower bounds: TTFT >= 2 s for the one with no token, E2EL for both.
  REQUIRE(m.incomplete_without_first_token_ms.size() == 1);
  CHECK(m.incomplete_without_first_token_ms[0] == Approx(2000));
  REQUIRE(m.incomplete_elapsed_ms.size() == 2);
  const auto j = m.summary();
  CHECK(j.at("abandoned") == 2);
  CHECK_FALSE(j.at("errors").contains("abandoned"));
  CHECK(j.at("failed") == 0);
}

TEST_CASE("the output token count states its source, and a usage that outruns the stream is flagged") {
  SECTION("usage agreeing with the stream's chunks within 10%") {
    StepAccumulator acc({0s, 10s, 12s, 1.0});
    acc.add(ok_request(1s, 1100ms, 10ms, 20));  // usage 20, 20 chunks
    auto r = ok_request(2s, 2100ms, 10ms, 20);
    r.output_tokens = 22;  // two tokens more than chunks: 10% of 22 is 2.2
    acc.add(r);
    const auto m = std::move(acc).finish();
    const auto j = m.summary();
    CHECK(j["output_tokens_source"] == "usage");
    CHECK(j["output_tokens_check"]["usage_tokens"] == 42);
    CHECK(j["output_tokens_check"]["stream_chunks"] == 40);
    CHECK(j["output_tokens_check"]["disagree"] == false);
  }
  SECTION("a server whose usage counts five times what it streamed") {
    StepAccumulator acc({0s, 10s, 12s, 1.0});
    auto r = ok_request(1s, 1100ms, 10ms, 20);
    r.output_tokens = 100;
    acc.add(r);
    const auto m = std::move(acc).finish();
    CHECK(m.token_counts_disagree());
    const auto j = m.summary();
    CHECK(j["output_tokens_check"]["usage_tokens_per_chunk"].get<double>() == Approx(5.0));
    CHECK(j["output_tokens_check"]["disagree"] == true);
    CHECK(j["total_output_tokens"] == 100);  // TPOT and throughput still use the usage
  }
  SECTION("counted where no usage came, mixed where some did; a non-streamed answer is not compared") {
    StepAccumulator acc({0s, 10s, 12s, 1.0});
    auto counted = ok_request(1s, 1100ms, 10ms, 5);
    counted.output_tokens_estimated = true;
    acc.add(counted);
    auto whole = ok_request(2s, 2100ms, 10ms, 1);
    whole.output_tokens = 64;  // one body holding 64 tokens
    whole.streamed = false;
    acc.add(whole);
    const auto m = std::move(acc).finish();
    CHECK(m.output_tokens_source() == "mixed");
    CHECK_FALSE(m.token_counts_disagree());
    CHECK_FALSE(m.summary().contains("output_tokens_check"));
  }
  SECTION("nothing completed: no source") {
    StepAccumulator acc({0s, 10s, 12s, 1.0});
    CHECK(std::move(acc).finish().summary()["output_tokens_source"].is_null());
  }
}

namespace {

// An answer of no generated tokens (embeddings, rerank) of `inputs` items that arrived whole.
RequestRecord pooled_request(Nanos scheduled, Nanos arrival, std::uint32_t inputs) {
  RequestRecord r;
  r.scheduled = r.dispatched = r.sent = scheduled;
  r.chunks.push_back({arrival, 0});
  r.finished = arrival;
  r.streamed = false;
  r.generated = false;
  r.inputs = inputs;
  r.input_tokens = 100 * inputs;
  return r;
}

}  // namespace

TEST_CASE("answers of no generated tokens: E2EL and items only, token latencies null and not 0") {
  GoodputBounds bounds;
  bounds.e2el = 60ms;
  StepAccumulator acc({0s, 10s, 12s, 1.0}, bounds);
  for (int i = 0; i < 10; ++i) acc.add(pooled_request(1s * i, 1s * i + 50ms, 4));
  acc.add(pooled_request(500ms, 500ms + 80ms, 4));  // past the goodput bound
  const StepMetrics m = std::move(acc).finish();
  CHECK(m.no_tokens());
  CHECK(m.completed == 11);
  CHECK(m.good == 10);
  CHECK(m.total_inputs == 44);
  CHECK(m.total_output_tokens == 0);
  CHECK(m.ttft_ms.empty());
  CHECK(m.itl_ms.empty());
  CHECK(m.tpot_ms.empty());
  const auto s = m.summary();
  for (const char* key :
       {"mean_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p95_itl_ms", "std_ttfo_ms", "p50_ttft_sent_ms"}) {
    INFO(key);
    CHECK(s.at(key).is_null());
  }
  CHECK(s["p50_e2el_ms"].get<double>() == Approx(50));
  CHECK(s["total_inputs"] == 44);
  CHECK(s["input_throughput"].get<double>() == Approx(44 / 10.0));
  CHECK(s["input_token_throughput"].get<double>() == Approx(4400 / 10.0));
  CHECK(s["output_throughput"] == 0);
}

TEST_CASE("answers of no generated tokens beside generated ones keep the token latencies, merges add items") {
  StepAccumulator a({0s, 10s, 12s, 1.0}), b({0s, 10s, 12s, 1.0});
  a.add(pooled_request(1s, 1050ms, 3));
  b.add(ok_request(2s, 2100ms, 10ms, 5));
  a.merge(std::move(b));
  const StepMetrics m = std::move(a).finish();
  CHECK_FALSE(m.no_tokens());
  CHECK(m.pooled == 1);
  CHECK(m.total_inputs == 3);
  CHECK(m.ttft_ms.count() == 1);  // the generated answer's only
  CHECK(m.e2el_ms.count() == 2);
  CHECK(m.summary()["mean_ttft_ms"].get<double>() == Approx(100));
  // Nothing completed: not "no tokens", the summary as ever (no items key).
  StepAccumulator none({0s, 10s, 12s, 1.0});
  const auto empty = std::move(none).finish();
  CHECK_FALSE(empty.no_tokens());
  CHECK_FALSE(empty.summary().contains("total_inputs"));
}

TEST_CASE("a whole (non-streamed) answer gives no TPOT sample: its tokens' pace was not seen") {
  StepAccumulator acc({0s, 10s, 12s, 1.0});
  RequestRecord whole = ok_request(1s, 1300ms, 0ms, 1);
  whole.output_tokens = 64;
  whole.streamed = false;
  acc.add(whole);
  acc.add(ok_request(2s, 2100ms, 10ms, 5));
  const StepMetrics m = std::move(acc).finish();
  CHECK(m.tpot_ms.count() == 1);
  CHECK(m.tpot_ms.mean() == Approx(10));
  CHECK(m.ttft_ms.count() == 2);
}

TEST_CASE("a target of several models: each model's metrics beside the total, parts merged alike") {
  StepAccumulator a({0s, 10s, 12s, 1.0}), b({0s, 10s, 12s, 1.0});
  a.split_by_model({"fast", "slow"});
  b.split_by_model({"fast", "slow"});
  RequestRecord fast = ok_request(1s, 1010ms, 4ms, 9);   // ITL 4 ms
  RequestRecord slow = ok_request(2s, 2040ms, 16ms, 9);  // ITL 16 ms
  slow.model = 1;
  a.add(fast);
  a.add(slow);
  b.add(fast);
  a.merge(std::move(b));
  const StepMetrics m = std::move(a).finish();
  REQUIRE(m.by_model.parts.size() == 2);
  CHECK(m.completed == 3);
  CHECK(m.by_model.parts[0].completed == 2);
  CHECK(m.by_model.parts[1].completed == 1);
  CHECK(m.by_model.parts[0].itl_ms.percentile(50) == Approx(4));
  CHECK(m.by_model.parts[1].itl_ms.percentile(50) == Approx(16));
  CHECK(m.by_model.parts[0].duration_s() == m.duration_s());
  const auto s = m.summary();
  REQUIRE(s["models"].size() == 2);
  CHECK(s["models"][0]["model"] == "fast");
  CHECK(s["models"][1]["model"] == "slow");
  CHECK(s["models"][1]["median_itl_ms"].get<double>() == Approx(16));
  CHECK_FALSE(s["models"][0].contains("distribution"));
  // One model: no split.
  StepAccumulator one({0s, 10s, 12s, 1.0});
  one.split_by_model({"only"});
  one.add(fast);
  CHECK_FALSE(std::move(one).finish().summary().contains("models"));
}

TEST_CASE("a target of several replicas: each replica's metrics and errors beside the total, models apart") {
  StepAccumulator a({0s, 10s, 12s, 1.0}), b({0s, 10s, 12s, 1.0});
  for (StepAccumulator* acc : {&a, &b}) {
    acc->split_by_model({"base", "lora"});
    acc->split_by_replica({"http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003"});
  }
  RequestRecord first = ok_request(1s, 1010ms, 4ms, 9);
  RequestRecord second = ok_request(2s, 2040ms, 16ms, 9);
  second.replica = 1;
  second.model = 1;
  RequestRecord refused;
  refused.scheduled = 3s;
  refused.finished = 3001ms;
  refused.outcome = Outcome::connect;
  refused.replica = 2;
  a.add(first);
  a.add(second);
  b.add(refused);
  b.add(first);
  a.end_window(9s, 11s);
  a.merge(std::move(b));
  const StepMetrics m = std::move(a).finish();
  REQUIRE(m.by_replica.parts.size() == 3);
  CHECK(m.measured == 4);
  CHECK(m.by_replica.parts[0].completed == 2);
  CHECK(m.by_replica.parts[1].completed == 1);
  CHECK(m.by_replica.parts[2].completed == 0);
  CHECK(m.by_replica.parts[2].outcomes[static_cast<std::size_t>(Outcome::connect)] == 1);
  CHECK(m.by_replica.parts[2].duration_s() == Approx(9));
  CHECK(m.by_model.parts[1].completed == 1);
  const auto s = m.summary();
  REQUIRE(s["replicas"].size() == 3);
  CHECK(s["replicas"][2]["replica"] == "http://127.0.0.1:8003");
  CHECK(s["replicas"][1]["median_itl_ms"].get<double>() == Approx(16));
  CHECK(s["replicas"][2]["failed"] == 1);
  CHECK(s["models"].size() == 2);
  // A record naming a replica the target has not is in the total alone.
  StepAccumulator c({0s, 10s, 12s, 1.0});
  c.split_by_replica({"http://a:1", "http://b:1"});
  RequestRecord stray = first;
  stray.replica = 7;
  c.add(stray);
  const StepMetrics n = std::move(c).finish();
  CHECK(n.completed == 1);
  CHECK(n.by_replica.parts[0].completed + n.by_replica.parts[1].completed == 0);
}

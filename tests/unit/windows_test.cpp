// Scenario windows: rows made incrementally as requests end, closed once their requests ended
// (or a window later), latencies by scheduled time, completions and gaps where they happened.
#include "core/windows.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;
using namespace std::chrono_literals;

namespace {

RequestRecord request(Nanos scheduled, Nanos ttft, int tokens, Nanos itl, Outcome outcome = Outcome::ok) {
  RequestRecord r;
  r.scheduled = r.dispatched = r.sent = scheduled;
  r.outcome = outcome;
  if (outcome != Outcome::ok) {
    r.finished = scheduled + 5ms;
    return r;
  }
  for (int i = 0; i < tokens; ++i) r.chunks.push_back({scheduled + ttft + itl * i, 1});
  r.finished = r.chunks.back().arrival;
  r.output_tokens = static_cast<std::uint32_t>(tokens);
  return r;
}

double per_window(Nanos, Nanos) {
  return 10;  // the profile expects 10 requests in each 5-s window: 2 req/s
}

}  // namespace

TEST_CASE("windows: a row per window, latencies by scheduled time, completions where they happened") {
  GoodputBounds goodput;
  goodput.ttft = 800ms;
  WindowAccumulator acc(5s, 20s, goodput);
  REQUIRE(acc.windows() == 4);
  // Window 0: two requests, one finishing in window 1; window 1: one fast, one slow (TTFT 900 ms).
  const auto a = request(1s, 100ms, 5, 20ms), b = request(4s, 200ms, 60, 20ms);  // b ends at ~5.4 s
  const auto c = request(6s, 50ms, 3, 10ms), d = request(7s, 900ms, 3, 10ms);
  const auto e = request(8s, 0ms, 0, 0ms, Outcome::http_5xx);
  for (const auto* r : {&a, &b, &c, &d, &e}) acc.on_scheduled(r->scheduled);
  acc.on_ended(a, false);
  // Nothing closes before the window's end.
  CHECK(acc.take_closed(4500ms, 1, {}, per_window).empty());
  // At 5.2 s window 0 still waits for b (not ended): it stays open.
  CHECK(acc.take_closed(5200ms, 1, {}, per_window).empty());
  acc.on_ended(b, false);
  acc.on_ended(c, false);
  acc.on_ended(d, false);
  acc.on_ended(e, true);
  auto rows = acc.take_closed(10500ms, 0, {}, per_window);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].index == 0);
  CHECK(rows[0].scheduled == 2);
  CHECK(rows[0].completed == 1);  // a; b completed in window 1
  CHECK(rows[0].in_flight == 1);  // b, at the first look after the window's end
  CHECK(rows[0].p50_ttft_ms == Approx(150));
  CHECK(rows[0].offered_rps == Approx(2));
  CHECK(rows[1].completed == 3);  // b, c, d
  CHECK(rows[1].good == 2);       // d's TTFT is past 800 ms
  CHECK(rows[1].goodput_rps == Approx(0.4));
  CHECK(rows[1].errors[static_cast<std::size_t>(Outcome::http_5xx)] == 1);
  CHECK(rows[1].rejected == 1);
  CHECK(rows[1].p95_ttft_ms.value() > 800);
  CHECK(rows[1].p95_itl_ms == Approx(20));  // most gaps ending in window 1 are b's
  // The rest close at the end, empty.
  rows = acc.take_closed(20s, 0, {}, per_window, true);
  REQUIRE(rows.size() == 2);
  CHECK(rows[1].index == 3);
  CHECK(rows[1].scheduled == 0);
  CHECK_FALSE(rows[1].p95_ttft_ms.has_value());
  CHECK(acc.take_closed(30s, 0, {}, per_window, true).empty());
}

TEST_CASE("windows: a window whose requests still wait closes one window later with their wait as TTFT") {
  WindowAccumulator acc(5s, 10s, {});
  acc.on_scheduled(1s);
  acc.on_scheduled(2s);
  acc.on_ended(request(1s, 100ms, 2, 10ms), false);
  CHECK(acc.take_closed(9s, 1, {{2s, std::nullopt}}, per_window).empty());  // the second may still answer
  const auto rows = acc.take_closed(10s, 1, {{2s, std::nullopt}}, per_window);
  REQUIRE(rows.size() == 2);  // and the empty second window, which ended too
  CHECK(rows[0].ttft_censored == 1);
  CHECK(rows[0].p99_ttft_ms.value() == Approx(8000).margin(100));  // waited 8 s and counting
}

TEST_CASE("windows: requests not yet sent when their window closes count their wait since its end") {
  // Three requests scheduled in window 0, none sent (a backlog before the connections), none
  // listed as live: at 11 s each has waited at least 6 s.
  WindowAccumulator acc(5s, 15s, {});
  for (const auto t : {1s, 2s, 3s}) acc.on_scheduled(t);
  const auto rows = acc.take_closed(11s, 0, {}, per_window);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].ttft_censored == 3);
  REQUIRE(rows[0].p95_ttft_ms.has_value());
  CHECK(rows[0].p95_ttft_ms.value() == Approx(6000).margin(100));
  // Listed ones count from their own scheduled time, the rest from the end.
  WindowAccumulator two(5s, 15s, {});
  for (const auto t : {1s, 2s}) two.on_scheduled(t);
  const auto r2 = two.take_closed(11s, 1, {{1s, std::nullopt}}, per_window);
  CHECK(r2[0].ttft_censored == 2);
  CHECK(r2[0].max_ttft_ms.value() == Approx(10000).margin(100));
  CHECK(r2[0].p50_ttft_ms.value() == Approx(8000).margin(100));  // 6 s and 10 s: their median
}

TEST_CASE("windows: a request streaming at the close counts its TTFT - what it does later is not counted twice") {
  WindowAccumulator acc(5s, 20s, {});
  acc.on_scheduled(1s);
  const auto rows = acc.take_closed(10s, 1, {{1s, 1300ms}}, per_window);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].p50_ttft_ms == Approx(300));
  CHECK(rows[0].ttft_censored == 0);
  // It ends later: nothing of it lands in the closed window, its completion counts where it happened.
  auto late = request(1s, 300ms, 400, 25ms);  // ends at ~11.3 s
  acc.on_ended(late, false);
  const auto next = acc.take_closed(20s, 0, {}, per_window, true);
  REQUIRE(next.size() == 2);
  CHECK(next[0].completed == 1);
  CHECK(next[0].scheduled == 0);
}

TEST_CASE("windows: the TTFTs of several windows pool into a percentile within 1%") {
  WindowAccumulator acc(1s, 3s, {});
  for (int i = 0; i < 300; ++i) {
    const Nanos at = std::chrono::milliseconds(10 * i);
    acc.on_scheduled(at);
    acc.on_ended(request(at, std::chrono::milliseconds(100 + i), 1, 0ms), false);
  }
  const auto rows = acc.take_closed(3s, 0, {}, per_window, true);
  REQUIRE(rows.size() == 3);
  std::vector<const WindowRow*> all;
  for (const auto& r : rows) all.push_back(&r);
  // TTFTs 100..399 ms: the pooled p95 is about 384 ms.
  CHECK(pooled_ttft_percentile(all, 95).value() == Approx(384).epsilon(0.01));
  // Window 0 holds 100..199 ms: its p50 (nearest rank, the 50th) is 149 ms.
  CHECK(pooled_ttft_percentile({&rows[0]}, 50).value() == Approx(149).epsilon(0.01));
  CHECK(rows[2].max_ttft_ms == Approx(399));
  CHECK_FALSE(pooled_ttft_percentile({}, 95).has_value());
}

// The sequential decision of a step on fabricated streams: far from the bound it decides at
// once, near it it waits, requests in flight and a lagging generator hold a decision back,
// and over many steps whose true percentile lies just beyond the bound it passes no more
// often than the confidence allows.
#include "core/decide.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/metrics.hpp"
#include "core/random.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

SloSpec slo_of(const char* text) {
  return parse_slo(json::parse(text)).value();
}

Nanos ms(double v) {
  return Nanos(static_cast<Nanos::rep>(v * 1e6));
}

// A request scheduled at `at` whose first token came `ttft_ms` later, then `tokens - 1`
// tokens `itl_ms` apart.
RequestRecord request(Nanos at, double ttft_ms, int tokens = 4, double itl_ms = 10) {
  RequestRecord r;
  r.scheduled = r.dispatched = r.sent = at;
  Nanos t = at + ms(ttft_ms);
  for (int i = 0; i < tokens; ++i) {
    r.chunks.push_back({t, 1});
    t += ms(itl_ms);
  }
  r.output_tokens = static_cast<std::uint32_t>(tokens);
  r.finished = r.chunks.back().arrival;
  return r;
}

struct Fed {
  std::optional<Decision> decision;
  std::uint64_t ended = 0;
};

// Feeds requests at `rate` per second (request i ends at its schedule + its TTFT, looked at
// then) until a decision or `max` requests.
template <class Ttft>
Fed feed(StepDecider& d, Ttft ttft, double rate, std::uint64_t max, std::uint64_t in_flight = 0, bool behind = false) {
  Fed f;
  for (std::uint64_t i = 0; i < max; ++i) {
    const Nanos at = ms(1000.0 * static_cast<double>(i) / rate);
    const double t = ttft(i);
    d.add(request(at, t));
    f.ended = i + 1;
    f.decision = d.look(at + ms(t + 30), in_flight, behind);
    if (f.decision) break;
  }
  return f;
}

}  // namespace

TEST_CASE("decide: binomial_cdf against exact values") {
  CHECK(binomial_cdf(10, 0, 0.5) == Approx(1.0 / 1024));
  CHECK(binomial_cdf(10, 5, 0.5) == Approx(638.0 / 1024));
  CHECK(binomial_cdf(20, 2, 0.1) == Approx(0.676927).epsilon(1e-5));
  CHECK(binomial_cdf(10, 10, 0.3) == 1);
  CHECK(binomial_cdf(10, 3, 0) == 1);
  CHECK(binomial_cdf(10, 3, 1) == 0);
}

TEST_CASE("decide: a target far within its p95 bound passes at the first look that can hold a pass") {
  const SloSpec slo = slo_of(R"({"ttft_ms": {"p95": 800}})");
  DecideSettings s;
  s.min_time = 5s;
  s.min_requests = 20;
  StepDecider d(slo, 0s, s);
  REQUIRE(d.can_decide());
  CHECK(d.look_confidence() == Approx(1 - 0.05 / 20));
  const Fed f = feed(
      d, [](std::uint64_t i) { return 100.0 + static_cast<double>(i % 50); }, 10, 5000);
  REQUIRE(f.decision);
  CHECK(f.decision->verdict == Verdict::pass);
  // With no sample above the bound, a pass needs 0.95^n <= (1 - look confidence) / 2: n >= 131.
  const auto need = static_cast<std::uint64_t>(std::ceil(std::log((1 - d.look_confidence()) / 2) / std::log(0.95)));
  CHECK(need == 131);
  CHECK(f.ended >= need);
  CHECK(f.ended <= static_cast<std::uint64_t>(need * 1.25) + 1);  // the look after it at most
  CHECK(f.decision->why.find("p95_ttft_ms") != std::string::npos);
  CHECK(f.decision->look == d.looks_taken());
}

TEST_CASE("decide: a target far beyond its bound fails within the first looks - a fail holds in the step's verdict") {
  const SloSpec slo = slo_of(R"({"ttft_ms": {"p95": 800}, "itl_ms": {"p95": 50}})");
  DecideSettings s;
  s.min_time = 2s;
  s.min_requests = 20;
  StepDecider d(slo, 0s, s);
  // One request in three takes 1.5 s to its first token.
  const auto ttft = [](std::uint64_t i) { return i % 3 == 0 ? 1500.0 : 200.0; };
  const Fed f = feed(d, ttft, 10, 5000);
  REQUIRE(f.decision);
  CHECK(f.decision->verdict == Verdict::fail);
  CHECK(f.ended == 20);  // the first look: 2 s and 20 requests in, 7 of 20 above the bound
  CHECK(f.decision->look == 1);
  // The step's own verdict on the same requests agrees (at its own, looser, confidence).
  StepAccumulator acc(StepWindow{0s, ms(1000.0 * static_cast<double>(f.ended) / 10), ms(1e7), 10});
  for (std::uint64_t i = 0; i < f.ended; ++i) acc.add(request(ms(100.0 * static_cast<double>(i)), ttft(i)));
  CHECK(evaluate_slo(slo, std::move(acc).finish()).verdict == Verdict::fail);
}

TEST_CASE("decide: no look before the minimum time and count, nor before the warm-up's end") {
  const SloSpec slo = slo_of(R"({"ttft_ms": {"p50": 800}})");
  DecideSettings s;
  s.min_time = 10s;
  s.min_requests = 30;
  StepDecider d(slo, 5s, s);
  // Requests of the warm-up are not counted.
  for (int i = 0; i < 100; ++i) d.add(request(ms(40.0 * i), 10));
  CHECK(d.ended() == 0);
  CHECK_FALSE(d.look(20s, 0, false));
  CHECK(d.looks_taken() == 0);
  // 40 measured requests but only 8 s measured: no look yet.
  for (int i = 0; i < 40; ++i) d.add(request(5s + ms(200.0 * i), 10));
  CHECK_FALSE(d.look(13s, 0, false));
  CHECK(d.looks_taken() == 0);
  // 10 s measured: p50 with 40 of 40 within decides at once.
  auto dec = d.look(15s, 0, false);
  REQUIRE(dec);
  CHECK(dec->verdict == Verdict::pass);
  CHECK(dec->at == 15s);
}

TEST_CASE("decide: requests in flight count against a pass - a lagging generator decides nothing") {
  const SloSpec slo = slo_of(R"({"ttft_ms": {"p95": 800}})");
  DecideSettings s;
  s.min_time = 0s;
  s.min_requests = 200;
  s.looks = 1;  // one look: its confidence is the SLO's
  SECTION("in flight") {
    StepDecider d(slo, 0s, s);
    for (int i = 0; i < 200; ++i) d.add(request(ms(10.0 * i), 100));
    // 200 ended within, 30 in flight: counted above the bound, 30 of 230 (13%) exceed a p95.
    CHECK_FALSE(d.look(10s, 30, false));
    CHECK(d.looks_taken() == 1);
    CHECK_FALSE(d.look(20s, 0, false));  // no looks left: the step runs to its maximum
  }
  SECTION("none in flight") {
    StepDecider d(slo, 0s, s);
    for (int i = 0; i < 200; ++i) d.add(request(ms(10.0 * i), 100));
    auto dec = d.look(10s, 0, false);
    REQUIRE(dec);
    CHECK(dec->verdict == Verdict::pass);
  }
  SECTION("the generator behind its schedule") {
    StepDecider d(slo, 0s, s);
    for (int i = 0; i < 200; ++i) d.add(request(ms(10.0 * i), 100));
    CHECK_FALSE(d.look(10s, 0, true));
    CHECK(d.looks_taken() == 1);  // the look was spent
  }
}

TEST_CASE("decide: in flight counted at or below the bound can hold a fail back") {
  const SloSpec slo = slo_of(R"({"ttft_ms": {"p90": 800}})");
  DecideSettings s;
  s.min_time = 0s;
  s.min_requests = 50;
  s.looks = 1;
  StepDecider a(slo, 0s, s), b(slo, 0s, s);
  for (int i = 0; i < 50; ++i) {
    a.add(request(ms(10.0 * i), i % 4 == 0 ? 2000 : 100));  // 13 of 50 above a p90 bound
    b.add(request(ms(10.0 * i), i % 4 == 0 ? 2000 : 100));
  }
  auto fail = a.look(5s, 0, false);
  REQUIRE(fail);
  CHECK(fail->verdict == Verdict::fail);
  CHECK_FALSE(b.look(5s, 60, false));  // 60 in flight could still bring it within
}

TEST_CASE("decide: the point criteria hold a pass back while they fail, and an error rate fails decided") {
  DecideSettings s;
  s.min_time = 0s;
  s.min_requests = 150;
  SECTION("a mean above its bound") {
    StepDecider d(slo_of(R"({"ttft_ms": {"p50": 800}, "e2el_ms": {"mean": 100}})"), 0s, s);
    const Fed f = feed(
        d, [](std::uint64_t) { return 200.0; }, 10, 2000);
    CHECK_FALSE(f.decision);
  }
  SECTION("a goodput floor not met") {
    StepDecider d(slo_of(R"({"ttft_ms": {"p50": 800}, "min_goodput_rps": 20})"), 0s, s);
    const Fed f = feed(
        d, [](std::uint64_t) { return 200.0; }, 10, 2000);
    CHECK_FALSE(f.decision);
  }
  SECTION("errors far above their bound") {
    StepDecider d(slo_of(R"({"ttft_ms": {"p50": 800}, "max_error_rate": 0.01})"), 0s, s);
    for (int i = 0; i < 150; ++i) {
      RequestRecord r = request(ms(100.0 * i), 50);
      if (i % 10 == 0) {
        r.outcome = Outcome::http_5xx;
        r.chunks.clear();
      }
      d.add(r);
    }
    auto dec = d.look(20s, 0, false);
    REQUIRE(dec);
    CHECK(dec->verdict == Verdict::fail);
    CHECK(dec->why.find("error_rate") != std::string::npos);
  }
  SECTION("an SLO without a percentile bound has nothing to decide") {
    StepDecider d(slo_of(R"({"ttft_ms": {"mean": 800}, "max_error_rate": 0.01})"), 0s, s);
    CHECK_FALSE(d.can_decide());
    const Fed f = feed(
        d, [](std::uint64_t) { return 10.0; }, 10, 500);
    CHECK_FALSE(f.decision);
    CHECK(d.looks_taken() == 0);
  }
}

TEST_CASE("decide: ITL is decided over the token gaps of ended requests") {
  StepDecider d(slo_of(R"({"itl_ms": {"p95": 50}})"), 0s, DecideSettings{0s, 10, 20, 1.25});
  for (int i = 0; i < 10; ++i) d.add(request(ms(100.0 * i), 50, 41, 20));  // 400 gaps of 20 ms
  auto dec = d.look(2s, 5, false);
  REQUIRE(dec);
  CHECK(dec->verdict == Verdict::pass);
  CHECK(dec->why == "p95_itl_ms: 400 of 400 samples within 50 ms");
}

TEST_CASE("decide: steps whose true p95 lies 10% beyond the bound pass no more often than the confidence allows") {
  // TTFT exponential with mean 100 ms: p95 = 299.6 ms; the bound 272 ms is the p93.4.
  const SloSpec slo = slo_of(R"({"ttft_ms": {"p95": 272}})");
  DecideSettings s;
  s.min_time = 0s;
  s.min_requests = 20;
  int false_passes = 0, fails = 0, undecided = 0;
  constexpr int kSteps = 400;
  for (int k = 0; k < kSteps; ++k) {
    Rng rng(1000 + k);
    StepDecider d(slo, 0s, s);
    const Fed f = feed(
        d, [&](std::uint64_t) { return 100.0 * rng.exponential(); }, 10, 3000);
    if (!f.decision)
      ++undecided;
    else if (f.decision->verdict == Verdict::pass)
      ++false_passes;
    else
      ++fails;
  }
  INFO(false_passes << " false passes, " << fails << " fails, " << undecided << " undecided of " << kSteps);
  // Each look spends (1 - 0.95) / 20; a false pass is one side of it: at most 2.5% in all.
  CHECK(false_passes <= kSteps * 25 / 1000);
  // 6.6% of requests above a bound that allows 5%: 3000 requests decide that fail in about
  // four steps of ten, and no step passes.
  CHECK(fails > kSteps / 4);
}

TEST_CASE("decide: a pass waits for min_pass_time (a fixed step's length), a fail does not") {
  const SloSpec slo = slo_of(R"({"ttft_ms": {"p50": 800}})");
  DecideSettings s;
  s.min_time = 1s;
  s.min_requests = 20;
  s.min_pass_time = 20s;
  SECTION("far within: looks before 20 s decide nothing, the first request after 20 s decides the pass") {
    StepDecider d(slo, 0s, s);
    const Fed f = feed(
        d, [](std::uint64_t) { return 50.0; }, 10, 1000);
    REQUIRE(f.decision);
    CHECK(f.decision->verdict == Verdict::pass);
    CHECK(f.decision->at >= 20s);
    CHECK(f.decision->at < 20s + 200ms);  // its own look, not the next one the count would bring
    CHECK(d.looks_taken() > 1);
  }
  SECTION("far beyond: the fail is decided at the first look") {
    StepDecider d(slo, 0s, s);
    const Fed f = feed(
        d, [](std::uint64_t) { return 1500.0; }, 10, 1000);
    REQUIRE(f.decision);
    CHECK(f.decision->verdict == Verdict::fail);
    CHECK(f.decision->look == 1);
    CHECK(f.decision->at < 5s);
  }
}

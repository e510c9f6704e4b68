// A/B statistics for regression jobs: the t distribution, Welch's test with the interval of
// the relative change, the three-way gate, Fisher's exact test; and the gate's behaviour on
// fabricated runs: no false alarm on A vs A', a real rise caught, noise said to be noise.
#include "core/compare.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "core/random.hpp"

using namespace capsweep;

TEST_CASE("compare: Student's t distribution and its quantiles") {
  CHECK(student_t_cdf(0, 3) == Approx(0.5));
  CHECK(student_t_cdf(1, 1) == Approx(0.75).margin(1e-9));  // Cauchy
  CHECK(student_t_quantile(0.975, 4) == Approx(2.7764).margin(1e-4));
  CHECK(student_t_quantile(0.975, 10) == Approx(2.2281).margin(1e-4));
  CHECK(student_t_quantile(0.025, 10) == Approx(-2.2281).margin(1e-4));
  CHECK(student_t_cdf(student_t_quantile(0.9, 2.5), 2.5) == Approx(0.9).margin(1e-9));
  CHECK(student_t_quantile(0.975, 1e9) == Approx(1.95996).margin(1e-4));
}

TEST_CASE("compare: Welch's test on per-run values, with the interval of the relative change") {
  const std::vector<double> a{1, 2, 3, 4}, b{2, 4, 6, 8};
  auto w = welch(a, b);
  REQUIRE(w.has_value());
  CHECK(w->mean_a == 2.5);
  CHECK(w->mean_b == 5);
  CHECK(w->change_pct == Approx(100));
  CHECK(w->t == Approx(1.7321).margin(1e-4));
  CHECK(w->df == Approx(4.4118).margin(1e-3));
  CHECK(w->p_two_sided == Approx(0.1516).margin(2e-3));  // numerical integration of the t density
  CHECK(w->p_greater == Approx(w->p_two_sided / 2));
  CHECK(w->ci_low_pct < 0);  // not significant: the interval holds zero
  CHECK(w->ci_high_pct > 200);
  // Exact sides compare exactly.
  const std::vector<double> same{5, 5, 5}, more{6, 6, 6};
  auto exact = welch(same, more);
  REQUIRE(exact.has_value());
  CHECK(exact->change_pct == Approx(20));
  CHECK(exact->ci_low_pct == Approx(20));
  CHECK(exact->p_greater == 0);
  // Errors.
  CHECK_FALSE(welch(std::vector<double>{1}, b).has_value());
  CHECK_FALSE(welch(std::vector<double>{0, 0}, b).has_value());
  CHECK_FALSE(welch(a, b, 1.5).has_value());
  CHECK_FALSE(welch(std::vector<double>{1, std::nan("")}, b).has_value());
}

TEST_CASE("compare: the gate fails a significant degradation past the threshold, passes a bounded one") {
  WelchResult w;
  w.change_pct = 15;
  w.ci_low_pct = 12;
  w.ci_high_pct = 18;
  w.p_greater = 0.001;
  w.p_less = 0.999;
  CHECK(judge_change(w, 10, Worse::higher) == ChangeVerdict::fail);
  CHECK(judge_change(w, 20, Worse::higher) == ChangeVerdict::pass);          // worst end 18 < 20
  CHECK(judge_change(w, 5, Worse::lower) == ChangeVerdict::pass);            // goodput went up
  CHECK(judge_change(w, 16, Worse::higher) == ChangeVerdict::inconclusive);  // 15 < 16 <= 18
  w.p_greater = 0.2;
  CHECK(judge_change(w, 10, Worse::higher) == ChangeVerdict::inconclusive);  // big but not significant
  CHECK(spread_pct(std::vector<double>{9, 10, 11}) == Approx(20));
}

namespace {

// `runs` per-run values of a metric around `mean` with relative noise `noise`.
std::vector<double> runs_of(Rng& rng, double mean, double noise, int runs = 3) {
  std::vector<double> v;
  for (int i = 0; i < runs; ++i) v.push_back(mean * (1 + noise * rng.normal()));
  return v;
}

struct Tally {
  int pass = 0, fail = 0, inconclusive = 0;
};

Tally gate(double rise, double noise, int repetitions = 200) {
  Tally t;
  for (int seed = 0; seed < repetitions; ++seed) {
    Rng rng(1000 + static_cast<std::uint64_t>(seed));
    const auto a = runs_of(rng, 40, noise), b = runs_of(rng, 40 * (1 + rise), noise);
    const auto w = welch(a, b);
    REQUIRE(w.has_value());
    switch (judge_change(*w, 10, Worse::higher)) {
      case ChangeVerdict::pass:
        ++t.pass;
        break;
      case ChangeVerdict::fail:
        ++t.fail;
        break;
      case ChangeVerdict::inconclusive:
        ++t.inconclusive;
        break;
    }
  }
  return t;
}

}  // namespace

TEST_CASE("compare: on fabricated runs (three each), A vs A' passes, a 15% ITL rise fails, noise is inconclusive") {
  // Two samples of one distribution, 2% run-to-run noise: no false alarm.
  const Tally same = gate(0.0, 0.02);
  INFO("A vs A': pass " << same.pass << ", fail " << same.fail << ", inconclusive " << same.inconclusive);
  CHECK(same.pass >= 190);  // at least 95% of 200
  CHECK(same.fail <= 2);
  // A true 15% rise of ITL p95 (threshold 10%) with small noise: caught.
  const Tally rise = gate(0.15, 0.02);
  INFO("15% rise, 2% noise: pass " << rise.pass << ", fail " << rise.fail << ", inconclusive " << rise.inconclusive);
  CHECK(rise.fail >= 150);
  CHECK(rise.pass == 0);
  // The same rise under noise larger than it: the measurement cannot judge it.
  const Tally noisy = gate(0.15, 0.25);
  INFO("15% rise, 25% noise: pass " << noisy.pass << ", fail " << noisy.fail << ", inconclusive "
                                    << noisy.inconclusive);
  CHECK(noisy.inconclusive >= 150);
  CHECK(noisy.pass <= 10);
}

TEST_CASE("compare: Fisher's exact test of a lower candidate rate") {
  // 9 of 10 against 3 of 10: p = 0.00988 (hypergeometric sum, computed exactly).
  CHECK(fisher_exact_less(9, 10, 3, 10) == Approx(0.009883).margin(1e-6));
  CHECK(fisher_exact_less(5, 10, 5, 10) > 0.5);
  CHECK(fisher_exact_less(0, 10, 0, 10) == Approx(1));
  CHECK(fisher_exact_less(990, 1000, 900, 1000) < 1e-10);
  CHECK(fisher_exact_less(11, 10, 1, 10) == 1);  // impossible counts: no evidence
}

namespace {

// Rounds in which both sides share the round's load (a factor common to both runs, spread
// `shared`) and each run adds its own noise (`own`); the candidate is `rise` slower.
Tally paired_gate(double rise, double shared, double own, int rounds = 3, int repetitions = 200) {
  Tally t;
  for (int seed = 0; seed < repetitions; ++seed) {
    Rng rng(5000 + static_cast<std::uint64_t>(seed));
    std::vector<double> a, b;
    for (int r = 0; r < rounds; ++r) {
      const double load = 1 + shared * rng.normal();
      a.push_back(40 * load * (1 + own * rng.normal()));
      b.push_back(40 * (1 + rise) * load * (1 + own * rng.normal()));
    }
    const auto w = paired_ratio(a, b);
    REQUIRE(w.has_value());
    const auto v = judge_change(*w, 10, Worse::higher);
    (v == ChangeVerdict::pass ? t.pass : v == ChangeVerdict::fail ? t.fail : t.inconclusive)++;
  }
  return t;
}

}  // namespace

TEST_CASE("compare: the paired test on per-round ratios - exact cases and its errors") {
  const std::vector<double> a{10, 20, 40}, b{11, 22, 44};  // +10% in every round, whatever the round's level
  const auto w = paired_ratio(a, b).value();
  CHECK(w.change_pct == Approx(10));
  CHECK(w.ci_low_pct == Approx(10));
  CHECK(w.ci_high_pct == Approx(10));
  CHECK(w.p_greater == 0);
  CHECK(w.df == 2);
  const auto v = paired_ratio(std::vector<double>{10, 20, 40}, std::vector<double>{10.5, 22, 42}).value();
  CHECK(v.change_pct > 5);
  CHECK(v.change_pct < 10);
  CHECK(v.ci_low_pct < v.change_pct);
  CHECK(v.ci_high_pct > v.change_pct);
  CHECK(v.p_greater < 0.05);
  CHECK(paired_ratio(std::vector<double>{1, 2}, std::vector<double>{1}).error().message ==
        "the sides have different numbers of rounds");
  CHECK(paired_ratio(std::vector<double>{1}, std::vector<double>{1}).error().message == "needs at least two rounds");
  CHECK(paired_ratio(std::vector<double>{1, 0}, std::vector<double>{1, 1}).error().message ==
        "a round has a value that is not positive: ratios are undefined");
}

TEST_CASE("compare: when rounds vary more than the runs within them, the paired test still judges") {
  // Each round's load moves both runs by 8% (3 rounds); within a round the runs differ by 1%.
  const Tally same = paired_gate(0.0, 0.08, 0.01);
  INFO("A vs A': pass " << same.pass << ", fail " << same.fail << ", inconclusive " << same.inconclusive);
  CHECK(same.pass >= 190);
  CHECK(same.fail <= 2);
  const Tally rise = paired_gate(0.15, 0.08, 0.01);
  INFO("15% rise: pass " << rise.pass << ", fail " << rise.fail << ", inconclusive " << rise.inconclusive);
  CHECK(rise.fail >= 150);
  CHECK(rise.pass == 0);
  // Noise within the rounds larger than the rise: no verdict either way, most of the time.
  const Tally noisy = paired_gate(0.15, 0.08, 0.25);
  INFO("15% rise, 25% run noise: pass " << noisy.pass << ", fail " << noisy.fail << ", inconclusive "
                                        << noisy.inconclusive);
  CHECK(noisy.inconclusive >= 150);
  CHECK(noisy.pass <= 10);
  // Welch on the same A vs A' runs sees the rounds' spread as noise and often cannot pass.
  int welch_pass = 0;
  for (int seed = 0; seed < 200; ++seed) {
    Rng rng(5000 + static_cast<std::uint64_t>(seed));
    std::vector<double> a, b;
    for (int r = 0; r < 3; ++r) {
      const double load = 1 + 0.08 * rng.normal();
      a.push_back(40 * load * (1 + 0.01 * rng.normal()));
      b.push_back(40 * load * (1 + 0.01 * rng.normal()));
    }
    welch_pass += judge_change(welch(a, b).value(), 10, Worse::higher) == ChangeVerdict::pass;
  }
  INFO("Welch passes A vs A' " << welch_pass << " of 200");
  CHECK(welch_pass < same.pass);
}

TEST_CASE("compare: Spearman's rank correlation with its Fisher-z interval - values, ties and errors") {
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<double> swapped{2, 1, 4, 3, 6, 5, 8, 7, 10, 9};  // every d = 1: rho = 1 - 6*10/990
  const auto r = spearman(x, swapped).value();
  CHECK(r.n == 10);
  CHECK(r.rho == Approx(0.939394).epsilon(1e-5));
  CHECK(r.ci_low == Approx(0.748779).epsilon(1e-4));
  CHECK(r.ci_high == Approx(0.986496).epsilon(1e-4));
  const std::vector<double> reversed{10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  CHECK(spearman(x, reversed).value().rho == Approx(-1));
  CHECK(spearman(x, x).value().ci_low > 0.99);  // a perfect agreement keeps its interval near 1
  // Monotone transforms do not change ranks: squared scores agree perfectly.
  std::vector<double> squared;
  for (double v : x) squared.push_back(v * v);
  CHECK(spearman(x, squared).value().rho == Approx(1));
  // Ties take their mean rank: ranks (1.5, 1.5, 3.5, 3.5) against (1, 2, 3, 4).
  CHECK(spearman(std::vector<double>{1, 1, 2, 2}, std::vector<double>{1, 2, 3, 4}).value().rho ==
        Approx(4 / std::sqrt(20.0)));
  // A wider interval with fewer pairs; a narrower one with a lower confidence.
  CHECK(spearman(x, swapped, 0.2).value().ci_low > r.ci_low);
  // Errors: too few pairs, unequal lengths, one side constant, a bad alpha.
  CHECK_FALSE(spearman(std::vector<double>{1, 2, 3}, std::vector<double>{1, 2, 3}).has_value());
  CHECK_FALSE(spearman(x, std::vector<double>{1, 2, 3, 4}).has_value());
  CHECK_FALSE(spearman(x, std::vector<double>(10, 5.0)).has_value());
  CHECK(spearman(x, swapped, 1.5).error().field == "/alpha");
}

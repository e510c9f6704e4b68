// A/B statistics for regression jobs: the t distribution, Welch's test with the interval of
// the relative change, the three-way gate, Fisher's exact test; and the gate's behaviour on
// fabricated runs: no false alarm on A vs A', a real rise caught, noise said to be noise.
#include "core/compare.hpp"

#include <catch2/catch.hpp>
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

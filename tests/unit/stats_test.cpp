#include "core/stats.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>

#include "core/random.hpp"

using namespace capsweep;

TEST_CASE("percentiles interpolate linearly between ranks - like numpy") {
  const std::vector<double> v{1, 2, 3, 4};
  CHECK(percentile_sorted(v, 0) == 1);
  CHECK(percentile_sorted(v, 50) == 2.5);
  CHECK(percentile_sorted(v, 95) == Approx(3.85));
  CHECK(percentile_sorted(v, 100) == 4);
  const std::vector<double> one{7};
  CHECK(percentile_sorted(one, 99) == 7);
}

TEST_CASE("rank intervals follow the binomial law of the order statistics") {
  // n = 100, p95, 95%: B ~ Bin(100, 0.95). P(B <= 89) = 0.0115 <= 0.025 < P(B <= 90) = 0.0282
  // so the lower end is X(90), 0-based 89; P(B <= 98) = 0.963 < 0.975 <= P(B <= 99) = 0.994
  // so the upper end is X(100), 0-based 99.
  auto r = percentile_rank_interval(100, 95, 0.95);
  CHECK(r.lower == 89);
  CHECK(r.upper == 99);
  // Too few samples for an upper bound on a p95: 0.95^59 = 0.048 > 0.025.
  auto few = percentile_rank_interval(59, 95, 0.95);
  CHECK(few.upper == 59);
  // Median of 8: lower X(1) (0-based 0), upper X(8) (0-based 7).
  auto med = percentile_rank_interval(8, 50, 0.95);
  CHECK(med.lower == 0);
  CHECK(med.upper == 7);
  // Median of 5 has no 95% interval below: P(B <= 0) = 1/32 > 0.025.
  CHECK(percentile_rank_interval(5, 50, 0.95).lower == -1);
  CHECK(percentile_rank_interval(0, 50, 0.95).lower == -1);
}

TEST_CASE("rank intervals cover the true percentile at least at their confidence") {
  // Exponential samples: true p90 = ln(10). Count how often [X(l), X(u)] contains it.
  Rng rng(77);
  const double truth = std::log(10.0);
  int covered = 0;
  const int trials = 2000;
  for (int t = 0; t < trials; ++t) {
    std::vector<double> v(150);
    for (auto& x : v) x = rng.exponential();
    std::sort(v.begin(), v.end());
    auto r = percentile_rank_interval(v.size(), 90, 0.95);
    REQUIRE(r.lower >= 0);
    REQUIRE(r.upper < 150);
    if (v[r.lower] <= truth && truth <= v[r.upper]) ++covered;
  }
  CHECK(covered >= 0.94 * trials);
  CHECK(covered <= 0.995 * trials);  // not trivially wide either
}

TEST_CASE("large-n rank intervals (normal approximation) stay close to the binomial") {
  auto r = percentile_rank_interval(1000000, 99, 0.95);
  // sd = sqrt(1e6 * .99 * .01) = 99.5; 1.96 sd = 195.
  CHECK(r.lower == Approx(990000 - 195).margin(3));
  CHECK(r.upper == Approx(990000 + 195).margin(3));
}

TEST_CASE("SampleSet is exact below its capacity") {
  SampleSet s(1000);
  for (double x : {5.0, 1.0, 3.0, 2.0, 4.0}) s.add(x);
  CHECK(s.exact());
  CHECK(s.count() == 5);
  CHECK(s.mean() == 3);
  CHECK(s.stddev() == Approx(std::sqrt(2.0)));
  CHECK(s.min() == 1);
  CHECK(s.max() == 5);
  CHECK(s.percentile(50) == 3);
  CHECK(s.percentile(90) == Approx(4.6));
  CHECK(s.value_at_rank(1) == 2);
  CHECK(std::isinf(s.value_at_rank(5)));
  s.add(0.5);  // sorted again lazily after an add
  CHECK(s.percentile(0) == 0.5);
}

TEST_CASE("SampleSet treats extra_top as samples above all others") {
  SampleSet s;
  for (int i = 1; i <= 9; ++i) s.add(i);
  CHECK(s.percentile(50, 1) == Approx(5.5));  // 1..9 and +inf: h = 4.5
  CHECK(std::isinf(s.percentile(95, 1)));     // h = 8.55 reaches the +inf sample
  CHECK(s.percentile(80, 0) == Approx(7.4));
}

TEST_CASE("SampleSet folds into a histogram within 1% relative error - memory bounded") {
  SampleSet exact(1 << 20), folded(1000);
  Rng rng(4);
  for (int i = 0; i < 200000; ++i) {
    const double x = std::exp(rng.normal() * 1.5 + 3);  // lognormal ms, wide range
    exact.add(x);
    folded.add(x);
  }
  CHECK(exact.exact());
  CHECK_FALSE(folded.exact());
  CHECK(folded.count() == 200000);
  CHECK(folded.mean() == Approx(exact.mean()));
  CHECK(folded.stddev() == Approx(exact.stddev()));
  CHECK(folded.max() == exact.max());
  for (double q : {1.0, 10.0, 50.0, 90.0, 95.0, 99.0, 99.9}) {
    INFO("q " << q);
    CHECK(std::abs(folded.percentile(q) / exact.percentile(q) - 1) <= 0.0101);
  }
  for (std::uint64_t i : {0ull, 7ull, 99999ull, 199998ull}) {
    CHECK(std::abs(folded.value_at_rank(i) / exact.value_at_rank(i) - 1) <= 0.0101);
  }
}

TEST_CASE("SampleSet keeps zeros and clamps negatives") {
  SampleSet s(4);
  for (int i = 0; i < 10; ++i) s.add(0.0);
  s.add(-3);  // a clock quirk, never a negative latency
  s.add(std::nan(""));
  CHECK(s.count() == 12);
  CHECK(s.percentile(50) == 0);
  CHECK(s.min() == 0);
  CHECK(s.max() == 0);
}

TEST_CASE("an empty SampleSet reports zeros - and open intervals") {
  SampleSet s;
  CHECK(s.empty());
  CHECK(s.percentile(95) == 0);
  CHECK(s.mean() == 0);
  CHECK(s.stddev() == 0);
  auto ci = s.percentile_interval(95, 0.95);
  CHECK(std::isinf(ci.lower));
  CHECK(std::isinf(ci.upper));
}

TEST_CASE("merged sample sets are one set fed every sample: exact below capacity, the same buckets above") {
  Rng rng(3);
  for (const std::size_t capacity : {std::size_t{1000}, std::size_t{100}}) {
    SampleSet whole(capacity), a(capacity), b(capacity), c(capacity);
    for (int i = 0; i < 600; ++i) {
      const double x = rng.exponential() * 40 + (i % 7 == 0 ? 0.0005 : 0.0);
      whole.add(x);
      (i % 3 == 0 ? a : i % 3 == 1 ? b : c).add(x);
    }
    a.merge(b);
    a.merge(c);
    a.merge(SampleSet(capacity));  // an empty part changes nothing
    CHECK(a.count() == whole.count());
    CHECK(a.exact() == whole.exact());
    CHECK(a.exact() == (capacity == 1000));
    CHECK(a.min() == whole.min());
    CHECK(a.max() == whole.max());
    CHECK(a.mean() == Approx(whole.mean()).epsilon(1e-12));
    CHECK(a.stddev() == Approx(whole.stddev()).epsilon(1e-9));
    for (double q : {0.0, 1.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0}) {
      CHECK(a.percentile(q) == whole.percentile(q));
      const auto ia = a.percentile_interval(q, 0.95), iw = whole.percentile_interval(q, 0.95);
      CHECK(ia.lower == iw.lower);
      CHECK(ia.upper == iw.upper);
    }
  }
}

TEST_CASE("merging into an empty set copies the other") {
  SampleSet empty, full;
  for (double x : {3.0, 1.0, 2.0}) full.add(x);
  empty.merge(full);
  CHECK(empty.count() == 3);
  CHECK(empty.min() == 1.0);
  CHECK(empty.max() == 3.0);
  CHECK(empty.percentile(50) == 2.0);
  CHECK(empty.mean() == Approx(2.0));
}

#pragma once
// Statistics over a step's samples: exact percentiles (numpy's default linear
// interpolation, as vLLM reports them), a bounded-memory sample store, and
// distribution-free confidence intervals for percentiles from binomial order statistics.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace capsweep {

// Percentile q in [0, 100] of sorted, non-empty `sorted` by linear interpolation between
// closest ranks (numpy.percentile's default). Precondition: sorted ascending, non-empty.
double percentile_sorted(std::span<const double> sorted, double q) noexcept;

// Ranks (0-based, into the sorted sample) bounding the q-th quantile with at least the given
// two-sided confidence, from the Binomial(n, q/100) law of the number of samples below it.
// lower == -1 means the interval is open below (too few samples); upper == n open above.
struct RankInterval {
  std::int64_t lower;
  std::int64_t upper;
};
RankInterval percentile_rank_interval(std::uint64_t n, double q, double confidence) noexcept;

// P(X <= k) for X ~ Binomial(n, p).
double binomial_cdf(std::uint64_t n, std::uint64_t k, double p) noexcept;

// Collects samples with bounded memory. Up to `exact_capacity` samples are kept as they are
// (percentiles exact); beyond that they are folded into a log-bucketed histogram whose
// reported values are within 1% of the true sample value (relative error <= 0.99%).
// Count, mean, standard deviation, min and max are always exact.
class SampleSet {
 public:
  static constexpr std::size_t kDefaultExactCapacity = 1 << 17;

  explicit SampleSet(std::size_t exact_capacity = kDefaultExactCapacity);

  // Adds a finite, non-negative sample (negatives are clamped to 0).
  void add(double x);

  // Adds every sample of `other`, as if each had been add()ed here: the values stay exact
  // while the two together fit this set's exact capacity, and fold into the same buckets as
  // one set fed all of them otherwise. Mean and variance combine exactly (Chan et al.).
  void merge(const SampleSet& other);

  std::uint64_t count() const noexcept { return count_; }
  bool empty() const noexcept { return count_ == 0; }
  bool exact() const noexcept { return !folded_; }
  double mean() const noexcept { return count_ ? mean_ : 0.0; }
  // Population standard deviation (numpy.std's default, as vLLM reports).
  double stddev() const noexcept;
  double min() const noexcept { return count_ ? min_ : 0.0; }
  double max() const noexcept { return count_ ? max_ : 0.0; }

  // Percentile q in [0, 100]; `extra_top` samples of +infinity are counted above every
  // stored sample (requests that never produced the metric but already exceeded a bound).
  // Returns 0 when there is no sample at all, +inf when the rank falls among extra_top.
  double percentile(double q, std::uint64_t extra_top = 0) const;

  // Value at 0-based rank i of the sorted samples (+inf for ranks >= count()).
  double value_at_rank(std::uint64_t i) const;

  // Confidence interval for the q-th percentile (values, -inf/+inf when open).
  struct Interval {
    double lower;
    double upper;
  };
  Interval percentile_interval(double q, double confidence, std::uint64_t extra_top = 0) const;

 private:
  void fold();
  void ensure_sorted() const;
  std::size_t bucket_of(double x) const noexcept;
  double bucket_value(std::size_t b) const noexcept;

  std::size_t exact_capacity_;
  bool folded_ = false;
  mutable bool sorted_ = true;
  mutable std::vector<double> values_;
  std::vector<std::uint64_t> buckets_;  // bucket 0: values below kMinValue
  double below_min_sum_ = 0;
  std::uint64_t count_ = 0;
  double mean_ = 0, m2_ = 0, min_ = 0, max_ = 0;
};

}  // namespace capsweep

#include "core/stats.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace capsweep {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Histogram geometry: bucket b >= 1 covers [kMinValue * g^(b-1), kMinValue * g^b) and reports
// 2 * lo * g / (1 + g), within (g - 1) / (g + 1) = 0.99% of every value in it.
constexpr double kGrowth = 1.02;
constexpr double kMinValue = 1e-6;      // sample units (ms here): smaller values share bucket 0
constexpr std::size_t kBuckets = 1600;  // covers up to kMinValue * 1.02^1599 ~ 5.6e7 (15 h in ms)

// log of the Binomial(n, p) probability of k.
double log_binomial_pmf(std::uint64_t n, std::uint64_t k, double p) {
  const double nd = static_cast<double>(n), kd = static_cast<double>(k);
  return std::lgamma(nd + 1) - std::lgamma(kd + 1) - std::lgamma(nd - kd + 1) + kd * std::log(p) +
         (nd - kd) * std::log1p(-p);
}

}  // namespace

double percentile_sorted(std::span<const double> sorted, double q) noexcept {
  const double h = (static_cast<double>(sorted.size()) - 1) * std::clamp(q, 0.0, 100.0) / 100.0;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  const auto hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = h - static_cast<double>(lo);
  if (frac == 0.0) return sorted[lo];
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

double binomial_cdf(std::uint64_t n, std::uint64_t k, double p) noexcept {
  if (k >= n || p <= 0) return 1;
  if (p >= 1) return 0;
  double cdf = 0;
  for (std::uint64_t i = 0; i <= k; ++i) cdf += std::exp(log_binomial_pmf(n, i, p));
  return std::min(cdf, 1.0);
}

RankInterval percentile_rank_interval(std::uint64_t n, double q, double confidence) noexcept {
  const auto n_signed = static_cast<std::int64_t>(n);
  if (n == 0) return {-1, 0};
  const double p = std::clamp(q / 100.0, 0.0, 1.0);
  const double tail = (1.0 - std::clamp(confidence, 0.0, 1.0)) / 2.0;
  if (p <= 0.0) return {-1, 0};
  if (p >= 1.0) return {n_signed - 1, n_signed};
  // B = number of samples below the true quantile ~ Binomial(n, p).
  // Lower bound X_(l) (1-based l) holds when B >= l: choose the largest l with P(B <= l-1) <= tail.
  // Upper bound X_(u) holds when B <= u-1: choose the smallest u with P(B <= u-1) >= 1 - tail.
  std::int64_t lower_1based = 0;             // 0: no lower bound
  std::int64_t upper_1based = n_signed + 1;  // n+1: no upper bound
  double cdf = 0;                            // P(B <= k)
  if (n <= 200000) {
    for (std::uint64_t k = 0; k <= n; ++k) {
      cdf += std::exp(log_binomial_pmf(n, k, p));
      const auto ks = static_cast<std::int64_t>(k);
      if (cdf <= tail) lower_1based = ks + 1;
      if (cdf >= 1.0 - tail) {
        upper_1based = ks + 1;
        break;
      }
    }
  } else {
    // Normal approximation with continuity correction; exact enough at this n.
    const double mu = static_cast<double>(n) * p;
    const double sd = std::sqrt(static_cast<double>(n) * p * (1 - p));
    // z for the tail via inverse of erfc: solve by bisection (no I/O, few iterations).
    double lo = 0, hi = 40;
    for (int i = 0; i < 100; ++i) {
      const double mid = (lo + hi) / 2;
      if (0.5 * std::erfc(mid / std::sqrt(2.0)) > tail)
        lo = mid;
      else
        hi = mid;
    }
    const double z = hi;
    lower_1based = static_cast<std::int64_t>(std::floor(mu - z * sd - 0.5));
    upper_1based = static_cast<std::int64_t>(std::ceil(mu + z * sd + 1.5));
    lower_1based = std::max<std::int64_t>(lower_1based, 0);
    upper_1based = std::min<std::int64_t>(upper_1based, n_signed + 1);
  }
  return {lower_1based - 1, upper_1based - 1};
}

SampleSet::SampleSet(std::size_t exact_capacity) : exact_capacity_(exact_capacity) {}

void SampleSet::add(double x) {
  if (!(x >= 0)) x = 0;  // negative or NaN: a clock quirk, never a negative latency
  ++count_;
  if (count_ == 1) {
    min_ = max_ = x;
  } else {
    min_ = std::min(min_, x);
    max_ = std::max(max_, x);
  }
  const double delta = x - mean_;
  mean_ += delta / static_cast<double>(count_);
  m2_ += delta * (x - mean_);
  if (!folded_) {
    values_.push_back(x);
    sorted_ = false;
    if (values_.size() > exact_capacity_) fold();
    return;
  }
  const auto b = bucket_of(x);
  ++buckets_[b];
  if (b == 0) below_min_sum_ += x;
}

void SampleSet::merge(const SampleSet& other) {
  if (other.count_ == 0) return;
  if (count_ == 0) {
    min_ = other.min_;
    max_ = other.max_;
  } else {
    min_ = std::min(min_, other.min_);
    max_ = std::max(max_, other.max_);
  }
  const auto n_a = static_cast<double>(count_), n_b = static_cast<double>(other.count_);
  const double delta = other.mean_ - mean_;
  const double n = n_a + n_b;
  mean_ += delta * n_b / n;
  m2_ += other.m2_ + delta * delta * n_a * n_b / n;
  count_ += other.count_;
  if (!folded_ && !other.folded_ && values_.size() + other.values_.size() <= exact_capacity_) {
    values_.insert(values_.end(), other.values_.begin(), other.values_.end());
    sorted_ = false;
    return;
  }
  if (!folded_) fold();
  if (other.folded_) {
    for (std::size_t b = 0; b < buckets_.size(); ++b) buckets_[b] += other.buckets_[b];
    below_min_sum_ += other.below_min_sum_;
    return;
  }
  for (double x : other.values_) {
    const auto b = bucket_of(x);
    ++buckets_[b];
    if (b == 0) below_min_sum_ += x;
  }
}

double SampleSet::stddev() const noexcept {
  return count_ ? std::sqrt(m2_ / static_cast<double>(count_)) : 0.0;
}

std::size_t SampleSet::bucket_of(double x) const noexcept {
  if (x < kMinValue) return 0;
  const double b = std::floor(std::log(x / kMinValue) / std::log(kGrowth)) + 1;
  return static_cast<std::size_t>(std::min(b, static_cast<double>(kBuckets - 1)));
}

double SampleSet::bucket_value(std::size_t b) const noexcept {
  if (b == 0) return buckets_[0] ? below_min_sum_ / static_cast<double>(buckets_[0]) : 0.0;
  const double lo = kMinValue * std::pow(kGrowth, static_cast<double>(b - 1));
  return 2 * lo * kGrowth / (1 + kGrowth);
}

void SampleSet::fold() {
  buckets_.assign(kBuckets, 0);
  for (double x : values_) {
    const auto b = bucket_of(x);
    ++buckets_[b];
    if (b == 0) below_min_sum_ += x;
  }
  values_.clear();
  values_.shrink_to_fit();
  folded_ = true;
}

void SampleSet::ensure_sorted() const {
  if (!sorted_) {
    std::sort(values_.begin(), values_.end());
    sorted_ = true;
  }
}

double SampleSet::value_at_rank(std::uint64_t i) const {
  if (i >= count_) return kInf;
  if (i == 0) return min_;
  if (i == count_ - 1) return max_;
  if (!folded_) {
    ensure_sorted();
    return values_[i];
  }
  std::uint64_t seen = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen > i) return std::clamp(bucket_value(b), min_, max_);
  }
  return max_;
}

double SampleSet::percentile(double q, std::uint64_t extra_top) const {
  const std::uint64_t n = count_ + extra_top;
  if (n == 0) return 0.0;
  const double h = static_cast<double>(n - 1) * std::clamp(q, 0.0, 100.0) / 100.0;
  const auto lo = static_cast<std::uint64_t>(std::floor(h));
  const double frac = h - static_cast<double>(lo);
  const double a = value_at_rank(lo);
  if (frac == 0.0) return a;
  const double b = value_at_rank(std::min(lo + 1, n - 1));
  if (std::isinf(b)) return kInf;
  return a + (b - a) * frac;
}

SampleSet::Interval SampleSet::percentile_interval(double q, double confidence, std::uint64_t extra_top) const {
  const std::uint64_t n = count_ + extra_top;
  const auto r = percentile_rank_interval(n, q, confidence);
  const double lower = r.lower < 0 ? -kInf : value_at_rank(static_cast<std::uint64_t>(r.lower));
  const double upper =
      static_cast<std::uint64_t>(r.upper) >= n ? kInf : value_at_rank(static_cast<std::uint64_t>(r.upper));
  return {lower, upper};
}

}  // namespace capsweep

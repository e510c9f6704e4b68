#include "core/compare.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace capsweep {

namespace {

// The continued fraction of the regularised incomplete beta function (modified Lentz).
double beta_fraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300, kEps = 1e-15;
  double c = 1, d = 1 - (a + b) * x / (a + 1);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1 / d;
  double h = d;
  for (int m = 1; m <= 500; ++m) {
    const double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
    d = 1 + num * d;
    c = 1 + num / c;
    if (std::fabs(d) < kTiny) d = kTiny;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    h *= d * c;
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
    d = 1 + num * d;
    c = 1 + num / c;
    if (std::fabs(d) < kTiny) d = kTiny;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < kEps) break;
  }
  return h;
}

// I_x(a, b), the regularised incomplete beta function, for x in [0, 1].
double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * beta_fraction(a, b, x) / a;
  return 1 - front * beta_fraction(b, a, 1 - x) / b;
}

struct Moments {
  double mean = 0, var = 0;  // sample variance (n - 1)
  std::size_t n = 0;
};

Moments moments(std::span<const double> v) {
  Moments m;
  m.n = v.size();
  m.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(m.n);
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= static_cast<double>(m.n - 1);
  return m;
}

double log_choose(std::uint64_t n, std::uint64_t k) {
  return std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(k) + 1) -
         std::lgamma(static_cast<double>(n - k) + 1);
}

}  // namespace

double student_t_cdf(double t, double df) {
  if (std::isinf(df)) return 0.5 * std::erfc(-t / std::sqrt(2.0));
  const double tail = 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t));
  return t >= 0 ? 1 - tail : tail;
}

double student_t_quantile(double p, double df) {
  if (p <= 0) return -std::numeric_limits<double>::infinity();
  if (p >= 1) return std::numeric_limits<double>::infinity();
  if (p < 0.5) return -student_t_quantile(1 - p, df);
  double lo = 0, hi = 1;
  while (student_t_cdf(hi, df) < p && hi < 1e12) hi *= 2;
  for (int i = 0; i < 200 && hi - lo > 1e-12 * std::max(1.0, hi); ++i) {
    const double mid = (lo + hi) / 2;
    (student_t_cdf(mid, df) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

Result<WelchResult> welch(std::span<const double> a, std::span<const double> b, double alpha) {
  if (a.size() < 2 || b.size() < 2) return invalid("", "needs at least two runs of each side");
  if (!(alpha > 0 && alpha < 1)) return invalid("/alpha", "must be in (0, 1)");
  for (double x : a)
    if (!std::isfinite(x)) return invalid("", "a baseline run has no finite value");
  for (double x : b)
    if (!std::isfinite(x)) return invalid("", "a candidate run has no finite value");
  const Moments ma = moments(a), mb = moments(b);
  if (ma.mean == 0) return invalid("", "the baseline's mean is zero: a relative change is undefined");
  WelchResult w;
  w.mean_a = ma.mean;
  w.mean_b = mb.mean;
  const double diff = mb.mean - ma.mean;
  w.change_pct = 100 * diff / std::fabs(ma.mean);
  const double va = ma.var / static_cast<double>(ma.n), vb = mb.var / static_cast<double>(mb.n);
  const double se = std::sqrt(va + vb);
  if (se == 0) {
    // No spread on either side: the difference is exact.
    w.ci_low_pct = w.ci_high_pct = w.change_pct;
    w.df = std::numeric_limits<double>::infinity();
    w.t = diff == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), diff);
    w.p_two_sided = diff == 0 ? 1 : 0;
    w.p_greater = diff > 0 ? 0 : 1;
    w.p_less = diff < 0 ? 0 : 1;
    if (diff == 0) w.p_greater = w.p_less = 0.5;
    return w;
  }
  w.df = (va + vb) * (va + vb) / (va * va / static_cast<double>(ma.n - 1) + vb * vb / static_cast<double>(mb.n - 1));
  w.t = diff / se;
  const double cdf = student_t_cdf(w.t, w.df);
  w.p_greater = 1 - cdf;
  w.p_less = cdf;
  w.p_two_sided = std::min(1.0, 2 * std::min(w.p_greater, w.p_less));
  const double half = student_t_quantile(1 - alpha / 2, w.df) * se;
  w.ci_low_pct = 100 * (diff - half) / std::fabs(ma.mean);
  w.ci_high_pct = 100 * (diff + half) / std::fabs(ma.mean);
  return w;
}

Result<WelchResult> paired_ratio(std::span<const double> a, std::span<const double> b, double alpha) {
  if (a.size() != b.size()) return invalid("", "the sides have different numbers of rounds");
  if (a.size() < 2) return invalid("", "needs at least two rounds");
  if (!(alpha > 0 && alpha < 1)) return invalid("/alpha", "must be in (0, 1)");
  std::vector<double> logs;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] > 0 && b[i] > 0 && std::isfinite(a[i]) && std::isfinite(b[i]))) {
      return invalid("", "a round has a value that is not positive: ratios are undefined");
    }
    logs.push_back(std::log(b[i] / a[i]));
  }
  const Moments d = moments(logs);
  WelchResult w;
  w.mean_a = moments(a).mean;
  w.mean_b = moments(b).mean;
  w.change_pct = 100 * std::expm1(d.mean);
  w.df = static_cast<double>(d.n - 1);
  const double se = std::sqrt(d.var / static_cast<double>(d.n));
  if (se == 0) {
    w.ci_low_pct = w.ci_high_pct = w.change_pct;
    w.t = d.mean == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), d.mean);
    w.p_two_sided = d.mean == 0 ? 1 : 0;
    w.p_greater = d.mean > 0 ? 0 : d.mean < 0 ? 1 : 0.5;
    w.p_less = d.mean < 0 ? 0 : d.mean > 0 ? 1 : 0.5;
    return w;
  }
  w.t = d.mean / se;
  const double cdf = student_t_cdf(w.t, w.df);
  w.p_greater = 1 - cdf;
  w.p_less = cdf;
  w.p_two_sided = std::min(1.0, 2 * std::min(w.p_greater, w.p_less));
  const double half = student_t_quantile(1 - alpha / 2, w.df) * se;
  w.ci_low_pct = 100 * std::expm1(d.mean - half);
  w.ci_high_pct = 100 * std::expm1(d.mean + half);
  return w;
}

ChangeVerdict judge_change(const WelchResult& w, double threshold_pct, Worse worse, double alpha) {
  const bool up_is_bad = worse == Worse::higher;
  const double degradation = up_is_bad ? w.change_pct : -w.change_pct;
  const double worst_end = up_is_bad ? w.ci_high_pct : -w.ci_low_pct;
  const double p = up_is_bad ? w.p_greater : w.p_less;
  if (degradation >= threshold_pct && p < alpha) return ChangeVerdict::fail;
  if (worst_end < threshold_pct) return ChangeVerdict::pass;
  return ChangeVerdict::inconclusive;
}

double spread_pct(std::span<const double> runs) {
  if (runs.empty()) return 0;
  const auto [lo, hi] = std::minmax_element(runs.begin(), runs.end());
  const double mean = std::accumulate(runs.begin(), runs.end(), 0.0) / static_cast<double>(runs.size());
  return mean == 0 ? 0 : 100 * (*hi - *lo) / std::fabs(mean);
}

namespace {

// Ranks 1..n, ties given the mean of the ranks they share.
std::vector<double> mean_ranks(std::span<const double> v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> rank(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double mean = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
    for (std::size_t k = i; k <= j; ++k) rank[order[k]] = mean;
    i = j + 1;
  }
  return rank;
}

}  // namespace

Result<RankCorrelation> spearman(std::span<const double> x, std::span<const double> y, double alpha) {
  if (!(alpha > 0 && alpha < 1)) return invalid("/alpha", "must be in (0, 1)");
  if (x.size() != y.size()) return invalid("", "the two score lists differ in length");
  if (x.size() < 4) return invalid("", fmt::format("{} pairs: a rank correlation needs at least 4", x.size()));
  const std::vector<double> rx = mean_ranks(x), ry = mean_ranks(y);
  // Pearson's correlation of the ranks (exact with ties).
  const double n = static_cast<double>(x.size());
  const double mean = (n + 1) / 2;
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx == 0 || syy == 0) return invalid("", "one side gave every pair the same score: nothing to rank");
  RankCorrelation r;
  r.n = x.size();
  r.rho = std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
  // Fisher's z; a perfect correlation keeps its end at +-1.
  const double z = std::atanh(std::clamp(r.rho, -0.999999, 0.999999));
  const double half =
      student_t_quantile(1 - alpha / 2, std::numeric_limits<double>::infinity()) * std::sqrt(1.06 / (n - 3));
  r.ci_low = std::tanh(z - half);
  r.ci_high = std::tanh(z + half);
  return r;
}

double fisher_exact_less(std::uint64_t k_a, std::uint64_t n_a, std::uint64_t k_b, std::uint64_t n_b) {
  if (k_a > n_a || k_b > n_b || n_a + n_b == 0) return 1;
  // Given k = k_a + k_b successes in n_a + n_b trials, the candidate's count is
  // hypergeometric; the p-value sums the tables with as few candidate successes or fewer.
  const std::uint64_t k = k_a + k_b, n = n_a + n_b;
  const std::uint64_t lo = k > n_a ? k - n_a : 0;
  const double log_total = log_choose(n, k);
  double p = 0;
  for (std::uint64_t x = lo; x <= k_b; ++x) {
    p += std::exp(log_choose(n_b, x) + log_choose(n_a, k - x) - log_total);
  }
  return std::min(1.0, p);
}

}  // namespace capsweep

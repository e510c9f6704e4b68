#pragma once
// Comparing a candidate with a baseline (regression jobs): Welch's t-test on per-run values
// with the confidence interval of the relative change, the three-way verdict against a
// threshold, and Fisher's exact test for rates (quality checks). Pure statistics over plain
// numbers; the distributions (Student's t, hypergeometric) are computed here, not looked up.

#include <cstdint>
#include <span>

#include "core/error.hpp"

namespace capsweep {

// Welch's two-sample t-test of candidate (b) against baseline (a), runs as samples.
struct WelchResult {
  double mean_a = 0, mean_b = 0;
  double change_pct = 0;                   // 100 (mean_b - mean_a) / mean_a
  double ci_low_pct = 0, ci_high_pct = 0;  // two-sided (1 - alpha) interval of change_pct
  double t = 0, df = 0;                    // statistic and Welch-Satterthwaite degrees of freedom
  double p_two_sided = 1;
  double p_greater = 0.5;  // one-sided: mean_b > mean_a
  double p_less = 0.5;     // one-sided: mean_b < mean_a
};
// Needs at least two runs on each side and a baseline mean other than zero. The interval is
// that of the difference of means divided by the baseline mean (the baseline's own
// uncertainty in the denominator is left out: adequate while its spread is small beside its
// mean, which the A-to-A check below watches). Two sides without any spread compare exactly.
Result<WelchResult> welch(std::span<const double> a, std::span<const double> b, double alpha = 0.05);

// The paired test of a design whose rounds give both sides the identical load (schedule and
// prompts): Student's t on the per-round log ratios ln(b_i / a_i), n - 1 degrees of freedom.
// What varies from round to round (the schedule drawn, the hour) is common to both runs of a
// round and cancels in the ratio. change_pct and its interval are those of the geometric mean
// ratio (100 (e^m - 1)); mean_a and mean_b are the sides' arithmetic means. Needs at least two
// rounds, equal counts, and positive values; rounds whose ratios are all equal compare exactly.
Result<WelchResult> paired_ratio(std::span<const double> a, std::span<const double> b, double alpha = 0.05);

// Which way a metric degrades: latency up (higher is worse) or goodput down (lower is worse).
enum class Worse { higher, lower };

enum class ChangeVerdict { pass, fail, inconclusive };
// The rule of a regression gate: fail when the degradation is at least `threshold_pct` and
// significant at `alpha` (one-sided, in the degrading direction); pass when the interval's
// worst end stays below the threshold; inconclusive otherwise ("add rounds").
ChangeVerdict judge_change(const WelchResult& w, double threshold_pct, Worse worse, double alpha = 0.05);

// The baseline's own run-to-run spread as a percentage of its mean: (max - min) / mean. A
// metric whose spread alone exceeds its threshold cannot be judged by this measurement.
double spread_pct(std::span<const double> runs);

// Student's t distribution: P(T <= t) with `df` > 0 degrees of freedom, and its quantile.
double student_t_cdf(double t, double df);
double student_t_quantile(double p, double df);

// Spearman's rank correlation of paired scores (a judge's against human labels), with ties
// given their mean rank, and its two-sided (1 - alpha) interval by Fisher's z with the
// standard error sqrt(1.06 / (n - 3)) of Fieller, Hartley and Pearson. Needs at least 4 pairs,
// equal lengths, and some spread on each side (constant scores rank nothing): errors name
// the cause.
struct RankCorrelation {
  std::size_t n = 0;
  double rho = 0;
  double ci_low = 0, ci_high = 0;
};
Result<RankCorrelation> spearman(std::span<const double> x, std::span<const double> y, double alpha = 0.05);

// Fisher's exact test of two rates (successes k of n): the one-sided p-value that the
// candidate's rate (k_b / n_b) is this much lower than the baseline's (k_a / n_a) or more
// by chance alone, conditioning on the total successes.
double fisher_exact_less(std::uint64_t k_a, std::uint64_t n_a, std::uint64_t k_b, std::uint64_t n_b);

}  // namespace capsweep

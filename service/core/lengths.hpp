#pragma once
// Token-length distributions for prompts and outputs, described the way production logs
// are ("median 900, p95 3800"). Every sample is a whole number of tokens, at least 1.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/random.hpp"

namespace capsweep {

enum class LengthKind { fixed, uniform, normal, lognormal, empirical };

std::string_view to_string(LengthKind k) noexcept;

class LengthDist {
 public:
  static LengthDist fixed(std::uint32_t value);
  // Uniform integers on [min, max].
  static Result<LengthDist> uniform(std::uint32_t min, std::uint32_t max);
  // Normal(mean, stdev), rounded, clamped to [min, max] (min at least 1).
  static Result<LengthDist> normal(double mean, double stdev, std::uint32_t min, std::uint32_t max);
  // Log-normal with the given median and 95th percentile (p95 > median):
  // mu = ln(median), sigma = (ln(p95) - mu) / z(0.95); rounded, clamped to [min, max].
  static Result<LengthDist> lognormal(double median, double p95, std::uint32_t min, std::uint32_t max);
  // Values drawn with the given weights (equal weights when `weights` is empty).
  static Result<LengthDist> empirical(std::vector<std::uint32_t> values, std::vector<double> weights = {});

  // One draw, >= 1.
  std::uint32_t sample(Rng& rng) const;
  LengthKind kind() const noexcept { return kind_; }
  // The largest value a draw can take (UINT32_MAX for normal and lognormal without a max).
  std::uint32_t upper_bound() const noexcept;
  // Mean of the distribution before clamping (exact for fixed, uniform, empirical).
  double nominal_mean() const noexcept;
  // The spec's form of this distribution ({"dist": ..., ...}): parse_length_dist makes it
  // again, draw for draw.
  nlohmann::json to_json() const;

 private:
  LengthKind kind_ = LengthKind::fixed;
  double a_ = 1, b_ = 1;  // fixed: value; uniform: min,max; normal: mean,stdev; lognormal: mu,sigma
  std::uint32_t min_ = 1, max_ = UINT32_MAX;
  std::vector<std::uint32_t> values_;
  std::vector<double> cumulative_;  // empirical: cumulative weights, last = total
  // As given (to_json): a lognormal's median and p95, an empirical's weights.
  double median_ = 0, p95_ = 0;
  std::vector<double> weights_;
};

// Parses a CSV histogram: one "value,weight" pair per line, an optional header line,
// blank lines and '#' comments ignored. Errors name the 1-based line.
Result<LengthDist> parse_length_histogram_csv(std::string_view csv, const std::string& field);

// What a sample of token counts (from a dataset or a log) looks like as a distribution the
// job spec takes: its own p50/p95/max, the log-normal fitted to it (maximum likelihood on the
// logarithms, given as median and p95 the way the spec writes it) and an empirical histogram
// of at most `bins` bins of equal width in log space (values: each bin's rounded geometric
// centre, clamped to the bin's samples; weights: sample counts). Needs one sample or more.
struct LengthFit {
  std::size_t count = 0;
  double p50 = 0, p95 = 0;
  std::uint32_t min = 0, max = 0;
  double lognormal_median = 0, lognormal_p95 = 0;
  std::vector<std::uint32_t> values;
  std::vector<double> weights;
};
Result<LengthFit> fit_lengths(std::vector<std::uint32_t> samples, std::size_t bins = 16);
// The two ready blocks: {"lognormal": {"dist": "lognormal", "median", "p95", "max"},
// "empirical": {"dist": "empirical", "values", "weights"}}, each accepted by parse_length_dist.
nlohmann::json length_fit_blocks(const LengthFit& fit);

// Parses {"dist": "fixed"|"uniform"|"normal"|"lognormal"|"empirical", ...}; errors carry
// a JSON pointer below `field` (e.g. "/workload/prompt_tokens/p95").
Result<LengthDist> parse_length_dist(const nlohmann::json& j, const std::string& field);

}  // namespace capsweep

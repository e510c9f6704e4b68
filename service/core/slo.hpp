#pragma once
// Service-level objectives of a step and their evaluation. A percentile criterion is judged
// against a distribution-free confidence interval of the percentile, so a step on few
// samples is "inconclusive" instead of a coin toss:
//   pass          the interval's upper end is within the bound,
//   fail          the interval's lower end is beyond the bound,
//   inconclusive  the bound lies inside the interval.
// Error rate and goodput floors are judged on their measured values.

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/metrics.hpp"

namespace capsweep {

enum class Verdict { pass, fail, inconclusive };
std::string_view to_string(Verdict v) noexcept;

// Latency metrics an SLO can bound (keys of the "slo" object).
enum class LatencyMetric { ttft, tpot, itl, e2el, ttft_sent, e2el_sent, ttfo };
std::string_view to_string(LatencyMetric m) noexcept;  // "ttft_ms", ...

// "ttft_ms": {"p95": 800} or {"mean": 300}.
struct LatencyBound {
  LatencyMetric metric = LatencyMetric::ttft;
  std::optional<double> percentile;  // in (0, 100); absent for a bound on the mean
  double bound_ms = 0;
};

struct SloSpec {
  std::vector<LatencyBound> latency;
  std::optional<double> max_error_rate;   // failed / measured, in [0, 1]
  std::optional<double> min_goodput_rps;  // good requests per second
  GoodputBounds goodput;                  // per-request bounds that define "good"
  double confidence = 0.95;               // two-sided confidence of percentile intervals
};

// Parses the "slo" object, e.g. {"ttft_ms": {"p95": 800}, "itl_ms": {"p95": 50},
// "max_error_rate": 0.001, "min_goodput_rps": 9.5, "goodput": {"ttft_ms": 800,
// "tpot_ms": 50}, "confidence": 0.95}. Errors name the field below `field`.
Result<SloSpec> parse_slo(const nlohmann::json& j, const std::string& field = "/slo");

// How many samples a step needs for its percentile bounds (the largest over the SLO's
// percentile bounds; 0 when it has none), by the same binomial interval the verdict uses:
//  - `decidable`: with not one sample above the bound the verdict can pass (fewer samples
//    can never pass, whatever the server does);
//  - `sized`: a server whose tail exceeds the bound half as often as the percentile allows
//    passes on its expected count of exceedances (a step of this size is not a coin toss
//    near the limit).
struct SampleNeed {
  std::uint64_t decidable = 0;
  std::uint64_t sized = 0;
  std::string percentile_name;  // the bound that needs the most ("p95_ttft_ms")
};
SampleNeed samples_needed(const SloSpec& slo);

struct CriterionResult {
  std::string name;  // "p95_ttft_ms", "mean_tpot_ms", "error_rate", "request_goodput"
  double bound = 0;
  double measured = 0;  // +inf when incomplete requests push the percentile past all data
  double ci_lower = 0;  // confidence interval of `measured` (equal to it for point criteria)
  double ci_upper = 0;
  std::uint64_t samples = 0;
  bool upper_bound = true;  // true: measured must be <= bound; false: >= bound
  Verdict verdict = Verdict::inconclusive;
  // measured / bound for upper bounds, bound / measured for floors: how far from the limit.
  double severity() const noexcept;
};

struct SloEvaluation {
  Verdict verdict = Verdict::inconclusive;
  std::vector<CriterionResult> criteria;
  bool generator_limited = false;  // a generator-limited step never passes
  // The criterion that limits the step: the failing (else inconclusive, else passing) one
  // with the highest severity; nullptr when the SLO has no criterion.
  const CriterionResult* limiting() const noexcept;
  nlohmann::json to_json() const;
};

// The "slo" object of a spec in words, in the order people state an SLO:
// "TTFT p95 ≤ 800 ms, ITL p95 ≤ 50 ms, errors ≤ 0.1%"; "no SLO" when it bounds nothing.
std::string describe_slo(const nlohmann::json& slo);

// Judges a step. Incomplete requests count as values above the bound for TTFT and E2EL
// criteria whose bound they had already exceeded when the drain ended.
SloEvaluation evaluate_slo(const SloSpec& slo, const StepMetrics& m, bool generator_limited = false);

}  // namespace capsweep

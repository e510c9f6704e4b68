#pragma once
// The regression job (kind "regression"), sans I/O like the sweep: `rounds` rounds of one
// timed run per side (baseline A, candidate B) at one rate, in the round's order, both sides
// of a round with the identical schedule and prompts; then, when the spec asks for quality
// checks, each side answers the quality items once (twice when determinism is checked).
//
// The verdict per metric: when every round has both runs, Student's t on the per-round log
// ratios (both runs of a round had the identical schedule and prompts, so what the round's
// draw does to both cancels); otherwise Welch's t on the per-run values (shown beside the
// paired test either way). Fail when the degradation reaches the threshold and is significant
// at alpha, pass when the interval's worst end stays below it, otherwise inconclusive. A
// metric whose run-to-run variation (the per-round ratios' spread; unpaired, the baseline
// runs') exceeds its threshold is flagged: never passed, failed only beyond that spread.
// Quality rates fail when the candidate's is lower by more than max_drop_pp and Fisher's exact
// test finds the drop significant.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sweep/step.hpp"

namespace capsweep::sweep {

// The sides in the order they run in round `round` (alternate: baseline first; shuffled: a
// coin drawn from the workload's seed and the round).
std::vector<Role> round_order(const JobSpec& spec, int round);

Action next_regression_action(const JobSpec& spec, const std::vector<StepOutcome>& steps);
Plan regression_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps);

// The result from every stored step: result.verdict (the worst), result.metrics.<key>,
// result.quality.<check>, result.judge, result.runs, result.warnings.
nlohmann::json regression_result(const JobSpec& spec, const std::vector<StepOutcome>& steps);

// What one quality step stores in its summary and the result reads back.
// {"role", "pass", "items", "answered", "errors", "checks": {"json": {"n", "ok"}, ...},
//  "answers": ["<hash>" | "" per item], "scores": [judge score | null per item]}
struct QualityTally {
  struct Count {
    std::uint64_t n = 0, ok = 0;
  };
  std::map<std::string, Count> checks;
  std::vector<std::string> answers;  // per item: a hash of the answer, "" when it failed
  std::vector<std::optional<double>> scores;
  // The judge's scores of the calibration set's labelled answers (the baseline's first pass).
  std::vector<std::optional<double>> calibration_scores;
};
QualityTally quality_tally_from(const nlohmann::json& summary);

}  // namespace capsweep::sweep

#pragma once
// The concurrency sweep (sweep.mode "concurrency"), sans I/O like the rate sweep: one
// closed-loop step per entry of sweep.levels, in order, until `stop_after_failures` levels in
// a row did not pass. The answer is the most users whose step passed with every smaller level
// passing too: a level is only claimed when it was shown to pass, and a failing level below a
// passing one caps the answer (and is named in a warning).

#include <vector>

#include "sweep/step.hpp"

namespace capsweep::sweep {

Action next_level_action(const JobSpec& spec, const std::vector<StepOutcome>& steps);
Plan level_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps);

}  // namespace capsweep::sweep

#pragma once
// Turns what the load engine measured in one step into what is stored and what the
// orchestrator reads: the summary (vLLM keys), the SLO evaluation with the saturation
// witnesses (a step above capacity never passes), the probe's steady rate or the baseline's
// synchronous rate, and the rows of requests.csv.

#include "loadgen/step_runner.hpp"
#include "store/rows.hpp"
#include "sweep/step.hpp"

namespace capsweep::sweep {

struct JudgedStep {
  StepOutcome outcome;
  store::StepRow row;  // index and times left to the caller
  std::vector<store::RequestRow> requests;
};

JudgedStep judge_step(const JobSpec& spec, const StepOrder& order, const loadgen::StepResult& result);

}  // namespace capsweep::sweep

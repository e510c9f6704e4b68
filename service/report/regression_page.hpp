#pragma once
// Internal to report/: the sections of a regression job's page. The verdict tables (each gated
// metric with both sides' runs, the change, its interval and the test; each quality check with
// both sides' rates), the runs of each round side by side, and one chart per metric of both
// sides across the rounds.

#include <nlohmann/json.hpp>
#include <string>

namespace capsweep::report::detail {

// `sweep` as GET /v1/sweeps/{id} returns it (a regression job), `steps` its stored steps.
std::string regression_sections(const nlohmann::json& sweep, const nlohmann::json& steps);

}  // namespace capsweep::report::detail

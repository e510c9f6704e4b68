#pragma once
// Internal to report/: the sections of a scenario job's page. The timeline (offered and
// achieved rate, TTFT p95 against the SLO, ready and desired replicas, window by window, with
// the spike, readiness flips and replica changes marked) and the checks table beside it.

#include <nlohmann/json.hpp>
#include <string>

namespace capsweep::report::detail {

// `sweep` as GET /v1/sweeps/{id} returns it (a scenario job), `windows` its stored windows.
std::string scenario_sections(const nlohmann::json& sweep, const nlohmann::json& windows);

}  // namespace capsweep::report::detail

#pragma once
// Which percentiles a job's exports show (steps.csv, the report, the CLI's tables): the
// spec's report.percentiles, else the defaults (50, 90, 95, 99, 99.9).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace capsweep::report {

// From a stored spec; entries that are not numbers in (0, 100) are skipped.
std::vector<double> report_percentiles(const nlohmann::json& spec);
// The summary keys of one latency metric ("ttft", "tpot", "itl", "e2el") at those
// percentiles: "mean_ttft_ms", "p50_ttft_ms", ..., "p99.9_ttft_ms".
std::vector<std::string> latency_keys(const std::string& metric, const std::vector<double>& percentiles);

}  // namespace capsweep::report

#pragma once
// How the CLI shows sweeps to people: the verdict first, aligned tables with units, one
// progress line. Pure: JSON as the API returns it in, text out.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace capsweep::cli {

// "TTFT p95 ≤ 800 ms, ITL p95 ≤ 50 ms, errors ≤ 0.1%" from the spec's "slo".
std::string slo_text(const nlohmann::json& slo);
// The verdict of a finished job, e.g. "max 10.2 req/s within SLO (TTFT p95 <= 800 ms, ...);
// knee at 12.7 req/s; limited by TTFT p95", or a check's "PASS ..." line.
std::string verdict_text(const nlohmann::json& sweep);
// A regression job's verdict: the sides and conditions, then one line per metric (each side's
// runs, the change with its interval, the threshold, p, the verdict) and per quality check
// (each side's rate, the drop, p, the verdict), the judge and the warnings.
std::string compare_text(const nlohmann::json& sweep);
// A scenario job's verdict: the conditions, one line per check (measured, bound, the windows
// that decided it, the verdict, the detail), the request totals and the warnings.
std::string scenario_text(const nlohmann::json& sweep);
// A scenario's windows (GET /v1/sweeps/{id}/windows "windows") as an aligned table.
std::string windows_table(const nlohmann::json& windows);
// The stored steps as an aligned table.
std::string steps_table(const nlohmann::json& steps);
// One line of progress: "ladder  step 4/10  42%  25.6 req/s  p95 TTFT 120 ms  ETA 1m05s";
// with `bar`, a 20-cell bar before the percentage ("[########............]").
std::string progress_text(const nlohmann::json& sweep, bool bar = false);
// j[key] when it is a string, else `fallback` (null and absent alike).
std::string text_of(const nlohmann::json& j, const char* key, const std::string& fallback = {});
// Text from the server made safe for a terminal: control characters (C0, DEL, and C1 as
// UTF-8), which could carry escape sequences, are dropped; newlines and tabs are kept only
// when `multiline`. Every string the CLI prints from an answer goes through it.
std::string terminal_safe(std::string_view text, bool multiline = false);
// "1m05s", "42s", "1h02m".
std::string duration_text(double seconds);

}  // namespace capsweep::cli

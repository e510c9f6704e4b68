#pragma once
// Internal to sweep/: what a scenario's checks share (scenario.cpp: the scaling checks and the
// result; scenario_readiness.cpp: the cold start and readiness checks): the facts read from
// the stored windows, and one check's JSON.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/json_access.hpp"
#include "core/windows.hpp"
#include "sweep/scenario.hpp"

namespace capsweep::sweep::scenario_checks {

inline nlohmann::json round3(double v) {
  return std::isfinite(v) ? nlohmann::json(std::round(v * 1000) / 1000) : nlohmann::json(nullptr);
}

// What the checks read of the windows, parsed once.
struct Facts {
  std::vector<WindowRow> rows;
  std::vector<nlohmann::json> raw;  // the stored rows (replica counts, readiness, server gauges)
  double window_s = 5;
  std::optional<double> spike_s;
};

inline std::optional<double> number_at(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = json_at(j, key);
  return v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt;
}

// The replica count a window shows: `serving`, else `ready` (or only the one asked).
inline std::optional<double> replicas_of(const nlohmann::json& w, const char* which = nullptr) {
  if (which) return number_at(w, which);
  if (auto s = number_at(w, "serving")) return s;
  return number_at(w, "ready");
}

inline std::uint64_t failures(const WindowRow& r, bool with_rejections) {
  std::uint64_t n = 0;
  for (std::size_t i = 0; i < kOutcomeCount; ++i) n += r.errors[i];
  return with_rejections ? n : n - std::min(n, r.rejected);
}

inline nlohmann::json check(const char* verdict, nlohmann::json measured, nlohmann::json bound, const char* unit,
                            std::optional<int> first, std::optional<int> last, std::string detail) {
  return {{"verdict", verdict},
          {"measured", std::move(measured)},
          {"bound", std::move(bound)},
          {"unit", unit},
          {"windows", nlohmann::json::array({first ? nlohmann::json(*first) : nlohmann::json(nullptr),
                                             last ? nlohmann::json(*last) : nlohmann::json(nullptr)})},
          {"detail", std::move(detail)}};
}

// The cold start check: from the first request after a scale from zero to its first token.
nlohmann::json cold_start(const nlohmann::json& events, const ScenarioChecks::ColdStart& c);
// The readiness check: each moment the target said it was ready, judged by the requests
// scheduled after it.
nlohmann::json readiness(const Facts& f, const nlohmann::json& events, const EarliestRequests& requests,
                         const ScenarioChecks::Readiness& r);

}  // namespace capsweep::sweep::scenario_checks

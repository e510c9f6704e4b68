#include "sweep/step.hpp"

#include <cmath>
#include <limits>

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

json number_or_null(std::optional<double> v) {
  return v && std::isfinite(*v) ? json(*v) : json(nullptr);
}

std::string_view to_string(StepKind k) noexcept {
  switch (k) {
    case StepKind::baseline:
      return "baseline";
    case StepKind::probe:
      return "probe";
    case StepKind::ladder:
      return "ladder";
    case StepKind::refine:
      return "refine";
    case StepKind::check:
      return "check";
    case StepKind::level:
      return "level";
    case StepKind::run:
      return "run";
    case StepKind::quality:
      return "quality";
    case StepKind::scenario:
      return "scenario";
  }
  return "ladder";
}

std::optional<StepKind> parse_step_kind(std::string_view s) noexcept {
  for (StepKind k : {StepKind::baseline, StepKind::probe, StepKind::ladder, StepKind::refine, StepKind::check,
                     StepKind::level, StepKind::run, StepKind::quality, StepKind::scenario}) {
    if (to_string(k) == s) return k;
  }
  return std::nullopt;
}

json StepOutcome::to_json() const {
  json j{{"kind", to_string(kind)},
         {"offered_rate_rps", std::isfinite(offered_rate_rps) ? json(offered_rate_rps) : json("inf")},
         {"verdict", capsweep::to_string(verdict)},
         {"rerun", rerun},
         {"saturated", saturated},
         {"unavailable", unavailable},
         {"generator_limited", generator_limited},
         {"measured_rate_rps", measured_rate_rps},
         {"users", users},
         {"completion_ratio", completion_ratio},
         {"completed", completed},
         {"measured", measured},
         {"limiting_metric", limiting_metric},
         {"limiting_value", std::isfinite(limiting_value) ? json(limiting_value) : json("inf")},
         {"p95_ttft_ms", p95_ttft_ms},
         {"mean_e2el_ms", mean_e2el_ms},
         {"server_in_system", number_or_null(server_in_system)}};
  if (role) {
    j["role"] = to_string(*role);
    j["round"] = round;
  }
  if (scout) j["scout"] = true;
  if (wall_s > 0) j["wall_s"] = wall_s;
  return j;
}

std::optional<StepOutcome> StepOutcome::from_json(const json& j) {
  try {
    StepOutcome s;
    auto kind = parse_step_kind(j.at("kind").get<std::string>());
    if (!kind) return std::nullopt;
    s.kind = *kind;
    // JSON has no infinity: an all_at_once step's rate is stored as "inf" (null in old rows).
    const json& rate = j.at("offered_rate_rps");
    s.offered_rate_rps = rate.is_number() ? rate.get<double>() : kInf;
    const std::string v = j.at("verdict").get<std::string>();
    s.verdict = v == "pass" ? Verdict::pass : v == "fail" ? Verdict::fail : Verdict::inconclusive;
    s.rerun = j.value("rerun", false);
    s.saturated = j.value("saturated", false);
    s.unavailable = j.value("unavailable", false);
    s.generator_limited = j.value("generator_limited", false);
    s.scout = j.value("scout", false);
    s.wall_s = j.value("wall_s", 0.0);
    s.measured_rate_rps = j.value("measured_rate_rps", 0.0);
    s.users = j.value("users", std::uint32_t{0});
    s.completion_ratio = j.value("completion_ratio", 1.0);
    s.completed = j.value("completed", std::uint64_t{0});
    s.measured = j.value("measured", std::uint64_t{0});
    s.limiting_metric = j.value("limiting_metric", std::string());
    const json& lv = j.value("limiting_value", json(0.0));
    s.limiting_value = lv.is_number() ? lv.get<double>() : kInf;
    s.p95_ttft_ms = j.value("p95_ttft_ms", 0.0);
    s.mean_e2el_ms = j.value("mean_e2el_ms", 0.0);
    if (auto it = j.find("server_in_system"); it != j.end() && it->is_number()) s.server_in_system = it->get<double>();
    if (auto it = j.find("role"); it != j.end()) {
      s.role = it->is_string() ? parse_role(it->get<std::string>()) : std::nullopt;
      if (!s.role) return std::nullopt;
      s.round = j.value("round", 0);
    }
    return s;
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace capsweep::sweep

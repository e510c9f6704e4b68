#include "sweep/levels.hpp"

#include <fmt/format.h>

#include <string>

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

StepOrder level_order(const JobSpec& spec, std::uint32_t users) {
  StepOrder o;
  o.kind = StepKind::level;
  o.phase = "level";
  o.closed_loop = true;
  o.concurrency = users;
  o.duration = spec.sweep.step_duration;
  o.warmup = spec.sweep.warmup;
  return o;
}

std::vector<const StepOutcome*> level_steps(const std::vector<StepOutcome>& steps) {
  std::vector<const StepOutcome*> out;
  for (const auto& s : steps) {
    if (s.kind == StepKind::level) out.push_back(&s);
  }
  return out;
}

int trailing_misses(const std::vector<const StepOutcome*>& done) {
  int n = 0;
  for (auto it = done.rbegin(); it != done.rend() && (*it)->verdict != Verdict::pass; ++it) ++n;
  return n;
}

json summary_value(const StepOutcome& s, const char* key) {
  auto it = s.summary.find(key);
  return it != s.summary.end() ? *it : json(nullptr);
}

json level_row(const StepOutcome& s) {
  return {{"users", s.users},
          {"verdict", to_string(s.verdict)},
          {"achieved_rate_rps", s.measured_rate_rps},
          {"p50_ttft_ms", summary_value(s, "p50_ttft_ms")},
          {"p95_ttft_ms", summary_value(s, "p95_ttft_ms")},
          {"p95_itl_ms", summary_value(s, "p95_itl_ms")},
          {"mean_e2el_ms", summary_value(s, "mean_e2el_ms")},
          {"output_throughput_tps", summary_value(s, "output_throughput")},
          {"limiting_metric", s.limiting_metric.empty() ? json(nullptr) : json(s.limiting_metric)}};
}

json levels_result(const JobSpec& spec, const std::vector<const StepOutcome*>& done) {
  json r;
  r["kind"] = "sweep";
  r["mode"] = "concurrency";
  json rows = json::array();
  const StepOutcome* best = nullptr;
  const StepOutcome* first_miss = nullptr;
  std::vector<std::string> warnings;
  for (const StepOutcome* s : done) {
    rows.push_back(level_row(*s));
    if (s->verdict == Verdict::pass && !first_miss) best = s;
    if (s->verdict != Verdict::pass && !first_miss) first_miss = s;
    if (s->verdict == Verdict::pass && first_miss) {
      warnings.push_back(
          fmt::format("non-monotone: {} users passed although {} users did not; the answer stops below {}", s->users,
                      first_miss->users, first_miss->users));
    }
    if (s->verdict == Verdict::inconclusive) {
      warnings.push_back(
          fmt::format("{} users: inconclusive ({} requests measured are too few for the SLO's "
                      "percentiles); lengthen step_duration_s",
                      s->users, s->measured));
    }
  }
  r["levels"] = rows;
  r["max_slo_concurrency"] = best ? json(best->users) : json(nullptr);
  r["rate_at_max_slo_concurrency_rps"] = best ? json(best->measured_rate_rps) : json(nullptr);
  r["limiting_metric"] =
      first_miss && !first_miss->limiting_metric.empty() ? json(first_miss->limiting_metric) : json(nullptr);
  if (!best && !done.empty())
    warnings.push_back(fmt::format("no level met the SLO, not even {} users", done[0]->users));
  if (!first_miss && done.size() == spec.sweep.levels.size()) {
    warnings.push_back(fmt::format("every level passed: the limit lies above {} users", spec.sweep.levels.back()));
  }
  r["warnings"] = warnings;
  return r;
}

}  // namespace

Action next_level_action(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  const auto done = level_steps(steps);
  const auto& levels = spec.sweep.levels;
  if (done.size() < levels.size() && trailing_misses(done) < spec.sweep.stop_after_failures) {
    return level_order(spec, levels[done.size()]);
  }
  return Finish{levels_result(spec, done)};
}

Plan level_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  Plan p;
  const auto action = next_level_action(spec, steps);
  if (!std::holds_alternative<StepOrder>(action)) {
    p.steps_planned = static_cast<int>(steps.size());
    p.phase = "done";
    return p;
  }
  p.phase = "level";
  p.steps_planned = static_cast<int>(spec.sweep.levels.size());
  return p;
}

}  // namespace capsweep::sweep

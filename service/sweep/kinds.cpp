// The kinds table: the four kinds from the start, more by register_kind (core/row_table.hpp).

#include "sweep/kinds.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "core/row_table.hpp"

namespace capsweep::sweep {

namespace {

RowTable<KindRules>& table() {
  // In JobKind's order: sweep, check, regression, scenario.
  static RowTable<KindRules> t("job kind", {sweep_kind(), check_kind(), regression_kind(), scenario_kind()});
  return t;
}

}  // namespace

const KindRules& rules(JobKind kind) {
  if (!table().has(kind.row())) throw std::out_of_range(fmt::format("no job kind in row {}", kind.row()));
  return table().at(kind.row());
}

std::vector<JobKind> all_kinds() {
  std::vector<JobKind> out;
  for (std::size_t i = 0; i < table().size(); ++i) out.push_back(JobKind::at(static_cast<std::uint8_t>(i)));
  return out;
}

JobKind register_kind(KindRules r) {
  if (r.name.empty() || !r.parse || !r.admit || !r.next_action || !r.progress || !r.step_length || !r.drain_timeout) {
    throw std::invalid_argument("a job kind needs a name, a parser, limits, a planner, progress and step lengths");
  }
  if (!r.think_time) r.think_time = [](const JobSpec&) { return std::optional<LengthDist>(); };
  return JobKind::at(static_cast<std::uint8_t>(table().add(std::move(r))));
}

std::string_view to_string(JobKind k) noexcept {
  return table().has(k.row()) ? std::string_view(table().at(k.row()).name) : std::string_view("sweep");
}

std::optional<JobKind> parse_job_kind(std::string_view s) noexcept {
  const auto i = table().find(s);
  return i ? std::optional<JobKind>(JobKind::at(static_cast<std::uint8_t>(*i))) : std::nullopt;
}

Action next_action(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  return rules(spec.kind).next_action(spec, steps);
}

Plan plan_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  return rules(spec.kind).progress(spec, steps);
}

}  // namespace capsweep::sweep

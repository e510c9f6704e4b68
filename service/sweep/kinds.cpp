// The kinds table: the four kinds from the start, more by register_kind. Rows are never removed
// or moved, so a reference to one stays valid; a shared lock guards the table's growth.

#include "sweep/kinds.hpp"

#include <fmt/format.h>

#include <deque>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>

namespace capsweep::sweep {

namespace {

struct Table {
  std::shared_mutex m;
  std::deque<KindRules> rows;
  Table() {
    // In JobKind's order: sweep, check, regression, scenario.
    rows.push_back(sweep_kind());
    rows.push_back(check_kind());
    rows.push_back(regression_kind());
    rows.push_back(scenario_kind());
  }
};

Table& table() {
  static Table t;
  return t;
}

}  // namespace

const KindRules& rules(JobKind kind) {
  Table& t = table();
  std::shared_lock lock(t.m);
  if (kind.row() >= t.rows.size()) throw std::out_of_range(fmt::format("no job kind in row {}", kind.row()));
  return t.rows[kind.row()];
}

std::vector<JobKind> all_kinds() {
  Table& t = table();
  std::shared_lock lock(t.m);
  std::vector<JobKind> out;
  for (std::size_t i = 0; i < t.rows.size(); ++i) out.push_back(JobKind::at(static_cast<std::uint8_t>(i)));
  return out;
}

JobKind register_kind(KindRules r) {
  if (r.name.empty() || !r.parse || !r.admit || !r.next_action || !r.progress || !r.step_length || !r.drain_timeout) {
    throw std::invalid_argument("a job kind needs a name, a parser, limits, a planner, progress and step lengths");
  }
  if (!r.think_time) r.think_time = [](const JobSpec&) { return std::optional<LengthDist>(); };
  Table& t = table();
  std::unique_lock lock(t.m);
  for (const auto& row : t.rows) {
    if (row.name == r.name) throw std::invalid_argument("job kind \"" + r.name + "\" is registered already");
  }
  if (t.rows.size() > 255) throw std::invalid_argument("the kinds table is full");
  t.rows.push_back(std::move(r));
  return JobKind::at(static_cast<std::uint8_t>(t.rows.size() - 1));
}

std::string_view to_string(JobKind k) noexcept {
  Table& t = table();
  std::shared_lock lock(t.m);
  return k.row() < t.rows.size() ? std::string_view(t.rows[k.row()].name) : std::string_view("sweep");
}

std::optional<JobKind> parse_job_kind(std::string_view s) noexcept {
  Table& t = table();
  std::shared_lock lock(t.m);
  for (std::size_t i = 0; i < t.rows.size(); ++i)
    if (t.rows[i].name == s) return JobKind::at(static_cast<std::uint8_t>(i));
  return std::nullopt;
}

Action next_action(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  return rules(spec.kind).next_action(spec, steps);
}

Plan plan_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  return rules(spec.kind).progress(spec, steps);
}

}  // namespace capsweep::sweep

#pragma once
// The kinds table: one descriptor per kind of job, saying everything that differs by kind —
// the spec blocks it owns and their parser, the service's limits on it, its planner and its
// progress, its step's length and drain. The spec parser, the admission, the planner entry
// points and the manager ask the table; none of them names a kind. The four kinds capsweep has
// (sweep, check, regression, scenario) are registered from the start, each in its file under
// sweep/kinds/; a new kind is one more descriptor (register_kind).

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/limits.hpp"
#include "core/time.hpp"
#include "sweep/spec.hpp"
#include "sweep/step.hpp"

namespace capsweep::sweep {

struct KindRules {
  std::string name;  // the spec's "kind", the stored row's, the result's
  // The spec's top-level blocks this kind owns: any other kind refuses them ("belongs to a
  // <name> job"), naming the block.
  std::vector<std::string> blocks;
  // Its targets are baseline.target and candidate.target instead of target.
  bool two_sides = false;
  // The JSON Schema of each block it owns that schema/sweep-spec.schema.json does not describe
  // ({"block": {...}}): a kind added later brings its own (the API adds it and the kind's name
  // to the spec's schema).
  nlohmann::json block_schemas = nlohmann::json::object();
  // Its blocks parsed into the spec (the blocks every kind shares are parsed already).
  std::function<std::optional<Error>(const nlohmann::json& spec, JobSpec& js)> parse;
  // The service's limits on a parsed spec (an error naming the field); may fill the limits the
  // spec leaves open into the stored document.
  std::function<std::optional<Error>(const ServiceLimits& limits, const JobSpec& js, nlohmann::json& doc)> admit;
  // Its planner: the next step (or the finish) from the steps stored so far; its progress.
  std::function<Action(const JobSpec& js, const std::vector<StepOutcome>& steps)> next_action;
  std::function<Plan(const JobSpec& js, const std::vector<StepOutcome>& steps)> progress;
  // The length of its ordinary step (warm-up + measured), for progress; 0 when it has none.
  std::function<Nanos(const JobSpec& js)> step_length;
  // How long a step's requests in flight may drain after its last send.
  std::function<Nanos(const JobSpec& js)> drain_timeout;
  // Whether its load steps may run on load agents (spec field "agents").
  bool agents = false;
  // A closed-loop step's think time (each user's pause after an answer); none by default.
  std::function<std::optional<LengthDist>(const JobSpec& js)> think_time;
};

// The kind's descriptor; every JobKind has one.
const KindRules& rules(JobKind kind);
// Every kind in the table, in order.
std::vector<JobKind> all_kinds();
// Adds a kind to the table (at start-up, before jobs are parsed); its JobKind. Throws
// std::invalid_argument when the name is taken or a function is missing.
JobKind register_kind(KindRules rules);

// The planner entry points: the job's kind's planner.
Action next_action(const JobSpec& spec, const std::vector<StepOutcome>& steps);
Plan plan_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps);

// The four kinds' descriptors (sweep/kinds/*.cpp).
KindRules sweep_kind();
KindRules check_kind();
KindRules regression_kind();
KindRules scenario_kind();

// A scenario's profile against the service's limits: its length, its peak rate, its requests
// (checked again once from_sweep has given it a capacity).
std::optional<Error> scenario_limits(const ServiceLimits& l, const JobSpec& spec);

}  // namespace capsweep::sweep

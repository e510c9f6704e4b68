#pragma once
// The traffic table: one row per feature of the load a job's steps may send (sessions, a
// trace's replay, abandonment, a step stopped once decided, ...), with what it is to the
// others: whether its requests are chained to the answers before them, whether it presumes
// independent requests, and whether load agents may send it. One check (check_traffic)
// decides every refusal between the rows a spec turns on, naming the field.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "sweep/spec.hpp"

namespace capsweep::sweep {

struct TrafficRow {
  std::string name = {};   // "sessions"
  std::string field = {};  // where a spec turns it on: "/workload/sessions"
  std::function<bool(const JobSpec&)> on = {};
  // Its requests are sent after answers before them (a session's turns).
  bool chained = false;
  // It presumes independent requests: with a chained row on, refused, with `why` (what it
  // presumes) and at the chained row's field where `refuse_at_chained` (a trace is refused
  // where the sessions are asked for), else at its own.
  bool needs_independent = false;
  bool refuse_at_chained = false;
  std::string why = {};
  // Load agents may send it (a job with "agents" is refused where a row on is not).
  bool agent_safe = true;
  // What it needs of the job beyond the other rows (a server-kept history needs a target API
  // that keeps conversations): an error naming the field, or none.
  std::function<std::optional<Error>(const JobSpec&)> fits = {};
};

// Adds a row (at start-up, before specs are parsed). Throws std::invalid_argument for a taken
// or empty name, a field not from '/', a row with no test of whether it is on, or a full table.
void register_traffic(TrafficRow row);
std::vector<std::string> traffic_names();

// The refusals between the rows `spec` turns on: a chained row with one that needs
// independent requests, a row agents may not send on agents.
std::optional<Error> check_traffic(const JobSpec& spec);

}  // namespace capsweep::sweep

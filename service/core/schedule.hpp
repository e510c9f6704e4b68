#pragma once
// Arrival schedules: a step's send times, generated in full from a seed before the step
// starts, so a step is reproducible and the generator never decides timing on the fly.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/time.hpp"

namespace capsweep {

class Rng;

// The arrival processes: rows of the arrival table (arrival_row), the five named here first,
// then any that register_arrival_process adds (their values follow trace's).
enum class ArrivalProcess : std::uint8_t {
  constant,     // evenly spaced, gap 1/rate
  poisson,      // exponential gaps, mean 1/rate
  gamma,        // gamma gaps with shape b (burstiness) and mean 1/rate; b=1 is Poisson
  all_at_once,  // every request at time zero (infinite rate); needs a count
  trace,        // a recorded trace's own arrivals, replayed (replay_schedule), scaled by a speed
};

// A row of the arrival table. A renewal process draws each gap after the one before (`gap`:
// a draw of mean `mean`); a step's schedule runs it at the step's rate, a scenario's profile in
// operational time (mean 1). all_at_once (a burst) and trace (a replay) have no gaps.
struct ArrivalRow {
  enum class Shape { renewal, burst, replay };
  std::string name;
  Shape shape = Shape::renewal;
  bool burstiness = false;  // its gaps read arrival.burstiness (their shape, > 0)
  bool grid = false;        // evenly spaced: request k at exactly k x the mean gap (no drift)
  std::function<double(Rng& rng, double burstiness, double mean)> gap = {};  // renewal rows off the grid
};
// The row of a process (poisson's for a value no row has).
const ArrivalRow& arrival_row(ArrivalProcess p) noexcept;
// Adds a renewal process to the table (at start-up, before specs are parsed); its value.
// Throws std::invalid_argument for a taken or empty name, a row without a gap or a full table.
ArrivalProcess register_arrival_process(ArrivalRow row);
// Every process's name, in the table's order (the spec schema's enum).
std::vector<std::string> arrival_process_names();

// A row's burstiness: positive and finite where its gaps read one (else nothing to check).
std::optional<Error> check_burstiness(const ArrivalRow& row, double burstiness, const std::string& field);

std::string_view to_string(ArrivalProcess p) noexcept;
// Parses a process's name; the error names `field` and the table's names.
Result<ArrivalProcess> parse_arrival_process(std::string_view text, const std::string& field);

struct ArrivalSpec {
  ArrivalProcess process = ArrivalProcess::poisson;
  double rate_rps = 1.0;    // requests per second; ignored for all_at_once
  double burstiness = 1.0;  // gamma shape b; used by gamma only
  double speed = 1.0;       // trace: time runs this many times faster than recorded
  bool loop = false;        // trace: replayed again from its start until the step's end
};

// How long a schedule runs: send times fall in [0, duration) and/or number at most
// `count`; at least one must be given.
struct ScheduleLimit {
  std::optional<Nanos> duration;
  std::optional<std::uint64_t> count;
};

// The largest schedule we generate (guards memory against absurd rate x duration).
inline constexpr std::uint64_t kMaxScheduledRequests = 10'000'000;

// Send times as offsets from the step's origin, non-decreasing.
struct Schedule {
  ArrivalSpec spec;
  std::vector<Nanos> send_times;
};

// Generates a schedule. Errors (fields relative to the arrival object): rate <= 0 or not
// finite ("/rate_rps"), burstiness <= 0 or not finite ("/burstiness"), no limit, or a
// limit that would exceed kMaxScheduledRequests.
Result<Schedule> make_schedule(const ArrivalSpec& spec, const ScheduleLimit& limit, std::uint64_t seed);

// A recorded trace's arrivals replayed: `offsets` (non-decreasing, from the trace's start)
// divided by `speed`; with `loop`, the trace again after its span plus its mean gap, as often
// as the limit allows, request k of loop l being row k (index l x rows + k). Cut at the
// limit's duration and count; `spec.rate_rps` is the mean rate over the duration (or over the
// schedule's span without one). Errors: no rows ("/workload/dataset"), speed <= 0 or not finite
// ("/speed"), a looped trace whose rows all share one time ("/loop"), no limit, or more than
// kMaxScheduledRequests.
Result<Schedule> replay_schedule(const std::vector<Nanos>& offsets, double speed, bool loop,
                                 const ScheduleLimit& limit);

// A trace's own mean rate, looped: its rows per period (its span plus its mean gap, as
// replay_schedule loops it) at speed 1. 0 when it cannot loop (fewer than two distinct times).
double trace_rate(const std::vector<Nanos>& offsets) noexcept;

// A trace replayed at a mean rate of `rate_rps` (a sweep's step, a regression's runs): looped at
// the speed that makes its rows per period that rate, its bursts and gaps kept in proportion.
// Errors: replay_schedule's, a rate <= 0 or not finite ("/rate_rps"), and a trace that cannot
// loop ("/workload/dataset": every row at one time has no rate to scale).
Result<Schedule> replay_at_rate(const std::vector<Nanos>& offsets, double rate_rps, const ScheduleLimit& limit);

// A 64-bit digest of a whole schedule: its arrival process, rate, burstiness and every send
// time, and `salt` (what else makes the step: its seed and request index base). Parts of one
// step that disagree on it are not parts of one step.
std::uint64_t schedule_digest(const Schedule& whole, std::uint64_t salt = 0) noexcept;

// One share of a schedule split by index: the requests j with j ≡ part (mod parts), at the
// whole schedule's times. The union of the parts 0 … parts-1 is the whole schedule exactly
// (same indices, same times), so the aggregate keeps the whole's burstiness whatever `parts`.
struct SchedulePart {
  std::uint32_t part = 0, parts = 1;
  std::vector<std::uint64_t> indices;  // increasing
  std::vector<Nanos> send_times;       // send_times[k] is request indices[k]'s
  std::uint64_t digest = 0;            // schedule_digest of the whole
};

// Preconditions: parts >= 1 and part < parts.
SchedulePart split_schedule(const Schedule& whole, std::uint32_t part, std::uint32_t parts, std::uint64_t salt = 0);

// How many of `count` indices fall to `part` of `parts` (indices j < count, j ≡ part mod parts).
constexpr std::uint64_t part_count(std::uint64_t count, std::uint32_t part, std::uint32_t parts) noexcept {
  return count > part ? (count - part + parts - 1) / parts : 0;
}

}  // namespace capsweep

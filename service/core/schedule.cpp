#include "core/schedule.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "core/random.hpp"
#include "core/row_table.hpp"

namespace capsweep {

namespace {

// The arrival table: the five processes from the start (in ArrivalProcess's order), more by
// register_arrival_process.
RowTable<ArrivalRow>& arrival_table() {
  static RowTable<ArrivalRow> t(
      "arrival process",
      {{.name = "constant", .grid = true, .gap = {}},
       {.name = "poisson", .gap = [](Rng& rng, double, double mean) { return rng.exponential() * mean; }},
       {.name = "gamma",
        .burstiness = true,
        .gap = [](Rng& rng, double b, double mean) { return rng.gamma(b) * mean / b; }},
       {.name = "all_at_once", .shape = ArrivalRow::Shape::burst, .gap = {}},
       {.name = "trace", .shape = ArrivalRow::Shape::replay, .gap = {}}});
  return t;
}

}  // namespace

const ArrivalRow& arrival_row(ArrivalProcess p) noexcept {
  return arrival_table().at(static_cast<std::size_t>(p), static_cast<std::size_t>(ArrivalProcess::poisson));
}

ArrivalProcess register_arrival_process(ArrivalRow row) {
  if (row.name.empty() || (!row.gap && !row.grid) || row.shape != ArrivalRow::Shape::renewal) {
    throw std::invalid_argument("an arrival process needs a name and gaps (a renewal process)");
  }
  return static_cast<ArrivalProcess>(arrival_table().add(std::move(row)));
}

std::vector<std::string> arrival_process_names() {
  return arrival_table().names();
}

std::string_view to_string(ArrivalProcess p) noexcept {
  return arrival_row(p).name;
}

Result<ArrivalProcess> parse_arrival_process(std::string_view text, const std::string& field) {
  if (const auto i = arrival_table().find(text)) return static_cast<ArrivalProcess>(*i);
  return invalid(
      field, fmt::format("unknown arrival process '{}' (expected {})", text, fmt::join(arrival_process_names(), ", ")));
}

namespace {

bool positive_finite(double x) {
  return std::isfinite(x) && x > 0;
}

}  // namespace

std::optional<Error> check_burstiness(const ArrivalRow& row, double burstiness, const std::string& field) {
  if (!row.burstiness || positive_finite(burstiness)) return std::nullopt;
  return invalid(field, fmt::format("burstiness must be a positive finite number (got {})", burstiness));
}

namespace {

// Every request at time zero: as many as the limit's count.
Result<Schedule> all_at_once_schedule(const ArrivalSpec& spec, const ScheduleLimit& limit) {
  if (!limit.count) return invalid("/requests", "all_at_once arrival needs a request count");
  if (*limit.count > kMaxScheduledRequests) {
    return invalid("/requests", fmt::format("at most {} requests", kMaxScheduledRequests));
  }
  return Schedule{spec, std::vector<Nanos>(*limit.count, Nanos{0})};
}

}  // namespace

Result<Schedule> make_schedule(const ArrivalSpec& spec, const ScheduleLimit& limit, std::uint64_t seed) {
  if (!limit.duration && !limit.count) {
    return invalid("", "a schedule needs a duration or a request count");
  }
  const ArrivalRow& row = arrival_row(spec.process);
  if (row.shape == ArrivalRow::Shape::replay) return invalid("/process", "a trace's arrivals are replayed, not drawn");
  if (row.shape == ArrivalRow::Shape::burst) return all_at_once_schedule(spec, limit);
  Schedule out{spec, {}};
  if (!positive_finite(spec.rate_rps)) {
    return invalid("/rate_rps", fmt::format("rate must be a positive finite number of "
                                            "requests per second (got {})",
                                            spec.rate_rps));
  }
  if (auto e = check_burstiness(row, spec.burstiness, "/burstiness")) return *e;
  const double duration_s = limit.duration ? to_s(*limit.duration) : INFINITY;
  const double expected =
      std::min(duration_s * spec.rate_rps, limit.count ? static_cast<double>(*limit.count) : INFINITY);
  if (expected > static_cast<double>(kMaxScheduledRequests)) {
    return invalid("/rate_rps", fmt::format("rate x duration would schedule {:.0f} requests, "
                                            "more than {}",
                                            expected, kMaxScheduledRequests));
  }
  const std::uint64_t max_count = limit.count ? *limit.count : kMaxScheduledRequests;
  out.send_times.reserve(static_cast<std::size_t>(std::min(expected * 1.1 + 16, 1e7)));

  Rng rng(seed);
  const double mean_gap_s = 1.0 / spec.rate_rps;
  double t_s = 0;  // accumulated in double seconds; converted once per request
  for (std::uint64_t i = 0; i < max_count; ++i) {
    if (row.grid) {
      t_s = static_cast<double>(i) * mean_gap_s;  // no accumulated rounding drift
    } else {
      t_s += row.gap(rng, spec.burstiness, mean_gap_s);
    }
    if (t_s >= duration_s) break;
    out.send_times.push_back(Nanos(static_cast<Nanos::rep>(std::llround(t_s * 1e9))));
    if (out.send_times.size() > kMaxScheduledRequests) {
      return invalid("/rate_rps", "schedule exceeds the maximum number of requests");
    }
  }
  return out;
}

// The latest a replay may send a row (a year): its nanoseconds stay far inside 64 bits.
constexpr double kMaxReplayOffsetS = 365.0 * 86400.0;

Result<Schedule> replay_schedule(const std::vector<Nanos>& offsets, double speed, bool loop,
                                 const ScheduleLimit& limit) {
  if (offsets.empty()) return invalid("/workload/dataset", "the trace has no rows");
  if (!positive_finite(speed))
    return invalid("/speed", fmt::format("must be a positive finite number (got {})", speed));
  if (!limit.duration && !limit.count) return invalid("", "a schedule needs a duration or a request count");
  const Nanos span = offsets.back() - offsets.front();
  if (loop && span <= Nanos{0}) return invalid("/loop", "a looped trace needs rows at more than one time");
  // A loop starts one mean gap after the last row, so that no two loops send at one instant.
  const Nanos period = span + (offsets.size() > 1 ? span / static_cast<Nanos::rep>(offsets.size() - 1) : Nanos{0});
  const std::uint64_t max_count =
      std::min<std::uint64_t>(limit.count.value_or(kMaxScheduledRequests), kMaxScheduledRequests + 1);
  Schedule out{{.process = ArrivalProcess::trace, .rate_rps = 0, .speed = speed, .loop = loop}, {}};
  for (std::uint64_t l = 0; out.send_times.size() < max_count; ++l) {
    for (const Nanos t : offsets) {
      const double at_s = to_s(t - offsets.front() + period * static_cast<Nanos::rep>(l)) / speed;
      if ((limit.duration && at_s >= to_s(*limit.duration)) || out.send_times.size() >= max_count) break;
      if (!(at_s < kMaxReplayOffsetS)) {
        return invalid("/speed", fmt::format("the replay would send a row {:.3g} s after its start (at most {:.0f} s)",
                                             at_s, kMaxReplayOffsetS));
      }
      const Nanos at(static_cast<Nanos::rep>(std::llround(at_s * 1e9)));
      if (limit.duration && at >= *limit.duration) break;
      out.send_times.push_back(at);
    }
    const bool cut = limit.duration && out.send_times.size() % offsets.size() != 0;
    if (!loop || cut ||
        (limit.duration && to_s(period * static_cast<Nanos::rep>(l + 1)) / speed >= to_s(*limit.duration)))
      break;
  }
  if (out.send_times.size() > kMaxScheduledRequests) {
    return invalid("/speed", fmt::format("the replay would schedule more than {} requests", kMaxScheduledRequests));
  }
  const double over_s =
      limit.duration ? to_s(*limit.duration) : (out.send_times.empty() ? 0 : to_s(out.send_times.back()));
  out.spec.rate_rps = over_s > 0 ? static_cast<double>(out.send_times.size()) / over_s : 0;
  return out;
}

double trace_rate(const std::vector<Nanos>& offsets) noexcept {
  if (offsets.size() < 2 || offsets.back() <= offsets.front()) return 0;
  const Nanos span = offsets.back() - offsets.front();
  const Nanos period = span + span / static_cast<Nanos::rep>(offsets.size() - 1);
  return static_cast<double>(offsets.size()) / to_s(period);
}

Result<Schedule> replay_at_rate(const std::vector<Nanos>& offsets, double rate_rps, const ScheduleLimit& limit) {
  if (!positive_finite(rate_rps))
    return invalid("/rate_rps", fmt::format("must be a positive finite number (got {})", rate_rps));
  const double own = trace_rate(offsets);
  if (!(own > 0)) {
    return invalid("/workload/dataset",
                   "the trace's rows all share one time: it has no rate to scale (replay it in a check)");
  }
  return replay_schedule(offsets, rate_rps / own, true, limit);
}

namespace {

std::uint64_t bits_of(double x) noexcept {
  std::uint64_t b = 0;
  static_assert(sizeof b == sizeof x);
  std::memcpy(&b, &x, sizeof b);
  return b;
}

}  // namespace

std::uint64_t schedule_digest(const Schedule& whole, std::uint64_t salt) noexcept {
  std::uint64_t h = splitmix64(salt);
  const auto fold = [&h](std::uint64_t v) { h = splitmix64(h ^ v) + 0x632BE59BD9B4E019ULL; };
  fold(static_cast<std::uint64_t>(whole.spec.process));
  fold(bits_of(whole.spec.rate_rps));
  fold(bits_of(whole.spec.burstiness));
  fold(whole.send_times.size());
  for (const Nanos t : whole.send_times) fold(static_cast<std::uint64_t>(t.count()));
  return h;
}

SchedulePart split_schedule(const Schedule& whole, std::uint32_t part, std::uint32_t parts, std::uint64_t salt) {
  SchedulePart out;
  out.part = part;
  out.parts = parts;
  out.digest = schedule_digest(whole, salt);
  const std::uint64_t n = part_count(whole.send_times.size(), part, parts);
  out.indices.reserve(n);
  out.send_times.reserve(n);
  for (std::uint64_t j = part; j < whole.send_times.size(); j += parts) {
    out.indices.push_back(j);
    out.send_times.push_back(whole.send_times[j]);
  }
  return out;
}

}  // namespace capsweep

// A scenario's cold start and readiness checks, from its events and the earliest requests
// after each moment the target became ready: a replica that says ready and then takes seconds
// for a first token fails, however it got there.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sweep/scenario_checks.hpp"

namespace capsweep::sweep::scenario_checks {

using json = nlohmann::json;

json cold_start(const json& events, const ScenarioChecks::ColdStart& c) {
  std::optional<double> ttft_s, ready_s;
  std::optional<std::string> first_outcome;
  for (const auto& e : events) {
    if (e.value("kind", "") == "first_token" && !first_outcome) {
      first_outcome = e.value("outcome", "");
      if (const json& t = json_at(e, "ttft_ms"); t.is_number()) ttft_s = t.get<double>() / 1000;
    }
    if (e.value("kind", "") == "readiness" && e.value("ready", false) && !ready_s) ready_s = e.value("t_s", 0.0);
  }
  const json bound{{"expected_s", c.expected_s}, {"tolerance_pct", c.tolerance_pct}};
  if (!first_outcome) return check("inconclusive", nullptr, bound, "s", {}, {}, "no request ended");
  if (!ttft_s) {
    // The first request of a cold target failed (refused while loading, timed out): the
    // users' first request saw no answer at all.
    return check("fail", {{"first_ttft_s", nullptr}, {"first_outcome", *first_outcome}}, bound, "s", 0, 0,
                 fmt::format("the first request got no first token ({})", *first_outcome));
  }
  const double lo = c.expected_s * (1 - c.tolerance_pct / 100), hi = c.expected_s * (1 + c.tolerance_pct / 100);
  const bool ok = *ttft_s >= lo && *ttft_s <= hi;
  return check(ok ? "pass" : "fail",
               {{"first_ttft_s", round3(*ttft_s)}, {"ready_after_s", ready_s ? round3(*ready_s) : json(nullptr)}},
               bound, "s", 0, 0,
               fmt::format("the first request's TTFT {:.2f} s against {:.2f} .. {:.2f} s", *ttft_s, lo, hi));
}

// The moments the target became ready: readiness flips to 200 (also at the start; read every
// 100 ms), and ready replica counts that grew. A count read at a window's end changed somewhere
// in that window. When replicas were ready before, the moment is dated from the window's start
// (the requests before the new one was ready went to the others, which should answer them).
// When none was, the requests before the moment waited for the first replica (the cold
// start's, not the readiness check's): the moment is the readiness flip in that window if one
// was read, else the window's end, when the count was read.
namespace {

std::vector<double> ready_moments(const Facts& f, const json& events) {
  std::vector<double> flips, moments;
  for (const auto& e : events) {
    if (e.value("kind", "") == "readiness" && e.value("ready", false)) flips.push_back(e.value("t_s", 0.0));
  }
  moments = flips;
  for (const auto& e : events) {
    if (e.value("kind", "") != "replicas" || e.value("which", "") != "ready") continue;
    const double from = e.value("from", 0.0), to = e.value("to", 0.0), t = e.value("t_s", 0.0);
    if (!(to > from)) continue;
    const double start = std::max(0.0, t - f.window_s);
    if (from > 0) {
      moments.push_back(start);
    } else if (std::none_of(flips.begin(), flips.end(), [&](double x) { return x >= start - 0.1 && x <= t; })) {
      moments.push_back(t);
    }
  }
  std::sort(moments.begin(), moments.end());
  return moments;
}

// The readiness bound when the spec gives none: 5 x the lowest TTFT p95 of the windows with at
// least 3 answers (the target ready and unloaded), and never under 500 ms. The lowest, not the
// first: a target that lied about readiness makes its first windows slow.
std::optional<double> default_ready_ttft_ms(const Facts& f) {
  std::optional<double> lowest;
  for (const auto& w : f.rows) {
    if (w.p95_ttft_ms && w.completed >= 3 && (!lowest || *w.p95_ttft_ms < *lowest)) lowest = w.p95_ttft_ms;
  }
  if (!lowest) return std::nullopt;
  return std::max(5 * *lowest, 500.0);
}

// A request that failed where a ready target would have answered: no connection, a timeout, a
// 5xx that was not a fast refusal.
bool failed_when_ready(const RequestSample& s) {
  return s.outcome == Outcome::connect || s.outcome == Outcome::timeout ||
         (s.outcome == Outcome::http_5xx && !s.rejected);
}

// The requests scheduled from a moment to `window_s` after it: how many, how many failed, the
// slowest first token, and the moment's row (its first five requests with their TTFTs).
struct MomentRequests {
  std::size_t count = 0;
  std::uint64_t failed = 0;
  double max_ttft_ms = 0;
  json row;
};

MomentRequests moment_requests(const EarliestRequests& requests, double t, double window_s) {
  MomentRequests m;
  const auto reqs = requests.between(t, t + window_s);
  json first = json::array();
  for (const auto& s : reqs) {
    m.failed += failed_when_ready(s) ? 1 : 0;
    m.max_ttft_ms = std::max(m.max_ttft_ms, s.ttft_ms.value_or(0));
    if (first.size() < 5) {
      first.push_back({{"scheduled_s", round3(s.scheduled_s)},
                       {"ttft_ms", s.ttft_ms ? round3(*s.ttft_ms) : json(nullptr)},
                       {"outcome", std::string(to_string(s.outcome))}});
    }
  }
  m.count = reqs.size();
  m.row = {{"at_s", round3(t)},
           {"requests", m.count},
           {"sampled", requests.dropped_between(t, t + window_s)},
           {"max_ttft_ms", reqs.empty() ? json(nullptr) : round3(m.max_ttft_ms)},
           {"failed_requests", m.failed},
           {"first_requests", std::move(first)}};
  return m;
}

}  // namespace

json readiness(const Facts& f, const json& events, const EarliestRequests& requests,
               const ScenarioChecks::Readiness& r) {
  const std::vector<double> moments = ready_moments(f, events);
  const std::optional<double> max_ttft = r.max_ttft_ms ? r.max_ttft_ms : default_ready_ttft_ms(f);
  const json bound{
      {"window_s", r.window_s}, {"max_ttft_ms", max_ttft ? round3(*max_ttft) : json(nullptr)}, {"failed_requests", 0}};
  if (moments.empty())
    return check("inconclusive", nullptr, bound, "", {}, {}, "the target never became ready in view");
  // Each moment is judged by the requests scheduled from it to window_s after it, one by one:
  // however the target got ready, the first requests after it must get a first token in time.
  const auto window_of = [&](double t) {
    return std::clamp(static_cast<int>(std::floor(t / std::max(f.window_s, 1e-9))), 0,
                      std::max(0, static_cast<int>(f.rows.size()) - 1));
  };
  json listed = json::array();
  std::optional<double> worst_at;
  double worst_ttft = 0;
  std::uint64_t worst_failed = 0;
  bool ok = true, any = false;
  for (double t : moments) {
    const MomentRequests m = moment_requests(requests, t, r.window_s);
    const std::uint64_t failed = m.failed;
    const double ttft = m.max_ttft_ms;
    listed.push_back(m.row);
    if (m.count == 0) continue;
    any = true;
    const bool bad = failed > 0 || (max_ttft && ttft > *max_ttft);
    // The moment shown: a bad one before a good one, the slower of two alike.
    if (!worst_at || (bad && ok) || (bad == !ok && ttft > worst_ttft)) {
      worst_at = t;
      worst_ttft = ttft;
      worst_failed = failed;
    }
    ok &= !bad;
  }
  json measured{{"max_ttft_ms", any ? round3(worst_ttft) : json(nullptr)},
                {"failed_requests", worst_failed},
                {"moments", std::move(listed)}};
  if (!any) {
    return check("inconclusive", std::move(measured), bound, "", {}, {},
                 fmt::format("{} moment(s) of readiness, no request scheduled within {} s after any", moments.size(),
                             r.window_s));
  }
  return check(ok ? "pass" : "fail", std::move(measured), bound, "", window_of(*worst_at),
               window_of(*worst_at + r.window_s),
               fmt::format("{} moment(s) of readiness; each judged by the requests scheduled from it to {} s after it",
                           moments.size(), r.window_s));
}

}  // namespace capsweep::sweep::scenario_checks

// A scouting rate sweep (sweep.search "scout"): after the baseline and the probe, short steps
// locate the bracket of the answer, and full-length steps confirm it.
//
//   scout at the probe's rate          -> escalate (x escalation_factor) while scouts pass,
//                                         step down (x 0.75, then x 0.5) while nothing passed
//   scout between the highest pass and the lowest fail, placed where the limiting metric's
//   severity (measured / bound) crosses 1 between them, until (fail - pass) / pass <= tolerance
//   confirm: a full-length step at the highest scout pass; only such a step claims a rate
//   a confirm that fails: the next full step one tolerance lower, until one passes
// A full-length step may end early once its fail is decided (core/decide.hpp); its pass needs
// its whole length.
//
// Why it is safe: a short step flatters a rate above capacity (its queue has not built), so a
// scout's pass is never the answer; but a scout's fail is a fail (overload only grows with
// time), so it may bound the answer. The answer is a full-length step's pass, with the same
// resolution against saturation as a ladder's.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sweep/rate_analysis.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The search's state: the bracket (a fail of either length, the highest pass of either length
// below it) and what was tried.
struct ScoutState {
  const RateResult* pass = nullptr;       // highest pass below `fail`, a scout's or a full step's
  const RateResult* fail = nullptr;       // Bracket::fail
  const RateResult* full_pass = nullptr;  // Bracket::pass: the claimable answer
  int full_fails = 0;                     // full-length steps that did not pass
  int scout_fails = 0;
  double tried_max = 0, tried_min = kInf;
};

ScoutState state_of(const Analysis& a) {
  ScoutState st;
  const Bracket b = bracket_of(a);
  st.fail = b.fail;
  st.full_pass = b.pass;
  for (const auto& r : a.fixed) {
    st.tried_max = std::max(st.tried_max, r.rate);
    st.tried_min = std::min(st.tried_min, r.rate);
    if (r.verdict != Verdict::pass) ++(r.scout ? st.scout_fails : st.full_fails);
    // At one rate a full step's pass outranks a scout's.
    const bool higher = !st.pass || r.rate > st.pass->rate || (r.rate == st.pass->rate && !r.scout);
    if (r.verdict == Verdict::pass && (!st.fail || r.rate < st.fail->rate) && higher) st.pass = &r;
  }
  return st;
}

// The largest measured / bound of a step's latency bounds: below 1 it passed them as measured.
std::optional<double> severity(const StepOutcome& s) {
  std::optional<double> worst;
  for (const auto& c : s.evaluation.value("criteria", json::array())) {
    if (c.value("comparison", "") != "<=") continue;
    const json& m = c["measured"];
    const double bound = c.value("bound", 0.0);
    if (!m.is_number() || !(bound > 0)) continue;
    worst = std::max(worst.value_or(0.0), m.get<double>() / bound);
  }
  return worst;
}

// Where the limiting severity crosses 1 between a step at `lo` (severity below 1) and one at
// `hi` (above), interpolated in log: a fraction of the way from lo to hi; nullopt when either
// has no latency figure, or when the fail saturated: past a knee, latency says nothing of
// where the knee is.
std::optional<double> crossing(const StepOutcome& lo, const StepOutcome& hi) {
  const auto sl = severity(lo), sh = severity(hi);
  if (hi.saturated || !sl || !sh || !(*sl > 0) || !(*sl < 1) || !(*sh > 1) || !std::isfinite(*sh)) return std::nullopt;
  return std::log(1 / *sl) / std::log(*sh / *sl);
}

// The next scout between a pass and a fail: at the crossing, kept within the middle 60% so each
// scout narrows the bracket; the geometric middle where there is no crossing, and after two
// scouts in a row on one side (an interpolation stuck on the flat side of a curve narrows the
// bracket from that side only: the Illinois rule's remedy).
double between(const Analysis& a, const RateResult& pass, const RateResult& fail) {
  const std::size_t n = a.fixed.size();
  const bool one_side = n >= 2 && a.fixed[n - 1].scout && a.fixed[n - 2].scout &&
                        (a.fixed[n - 1].verdict == Verdict::pass) == (a.fixed[n - 2].verdict == Verdict::pass);
  const auto t = crossing(*pass.step, *fail.step);
  if (t && !one_side) return pass.rate + std::clamp(*t, 0.2, 0.8) * (fail.rate - pass.rate);
  return std::sqrt(pass.rate * fail.rate);
}

double capped(const SweepSettings& s, double rate) {
  return s.max_rate_rps ? std::min(rate, *s.max_rate_rps) : rate;
}

// A full-length step: a pass needs its whole length, as in the ladder, but a fail may end it
// once decided (the decided stop's looks, up to its fixed length).
StepOrder full_step(const JobSpec& spec, const char* phase, double rate) {
  StepOrder o = rate_step_order(spec, StepKind::refine, phase, rate, 1);
  o.decided = true;
  return o;
}

StepOrder confirm(const JobSpec& spec, double rate) {
  return full_step(spec, "confirm", rate);
}

// Nothing failed yet: scout higher, or confirm the cap once a scout passed there. The probe's
// rate estimates saturation, so the first scout above it looks just above (two tolerances);
// later ones escalate by escalation_factor.
Action upward(const JobSpec& spec, const Analysis& a, const ScoutState& st) {
  const SweepSettings& s = spec.sweep;
  const bool at_cap = s.max_rate_rps && st.tried_max >= *s.max_rate_rps * (1 - 1e-9);
  const double factor = a.fixed.size() == 1 ? std::min(s.escalation_factor, 1 + 2 * s.tolerance) : s.escalation_factor;
  if (!at_cap) return scout_step_order(spec, capped(s, st.tried_max * factor));
  if (st.full_pass && st.full_pass->rate >= st.tried_max * (1 - 1e-9)) {
    return Finish{sweep_result(spec, a, {"every rate up to sweep.max_rate_rps passed: the capacity is above it"})};
  }
  return confirm(spec, st.tried_max);
}

// Nothing passed below the lowest fail: scout lower, down to a floor of the ladder range's low
// end / 8. Below a fail on a latency bound: where the severity, interpolated from the baseline,
// crosses 1 (within 0.5x to 0.9x). Below a saturated fail: 10% lower the first time (the
// probe's rate is near the knee), half after that.
Action downward(const JobSpec& spec, const Analysis& a, const ScoutState& st) {
  const double from = std::min(st.tried_min, st.fail->rate);
  double next = from * (st.scout_fails + st.full_fails <= 1 ? 0.9 : 0.5);
  const RateResult* lowest = st.fail;
  for (const auto& r : a.fixed) {
    if (r.verdict != Verdict::pass && r.rate < lowest->rate) lowest = &r;
  }
  const double r_sync = a.baseline->measured_rate_rps;
  if (const auto t = crossing(*a.baseline, *lowest->step); t && r_sync < from) {
    next = std::clamp(r_sync + *t * (from - r_sync), 0.5 * from, 0.9 * from);
  }
  if (next < a.range.lo / 8) {
    return Finish{sweep_result(spec, a, {fmt::format("no rate down to {:.3g} req/s met the SLO", from)})};
  }
  return scout_step_order(spec, next);
}

// What the answer's step could resolve: an overload of e builds e * rate * D requests over its
// D measured seconds, against a noise of about 3 sqrt(2 L) with L = rate * mean E2EL in flight,
// so an overload below e = 3 sqrt(2 L) / (rate * D) may pass unseen. The capacity then lies in
// [pass / (1 + e), fail].
json resolution_block(const Bracket& b) {
  if (!b.pass) return nullptr;
  const StepOutcome& s = *b.pass->step;
  const double rate = b.pass->rate, d = s.summary.value("duration_s", 0.0);
  const double in_flight = rate * s.mean_e2el_ms / 1000.0;
  if (!(d > 0) || !(rate > 0) || !(in_flight > 0)) return nullptr;
  const double e = 3 * std::sqrt(2 * in_flight) / (rate * d);
  return {{"step_s", d},
          {"in_flight", in_flight},
          {"undetected_overload_pct", 100 * e},
          {"capacity_interval_rps", json::array({rate / (1 + e), b.fail ? json(b.fail->rate) : json(nullptr)})}};
}

}  // namespace

Action next_scout_action(const JobSpec& spec, const Analysis& a) {
  const SweepSettings& s = spec.sweep;
  if (a.fixed.empty()) return scout_step_order(spec, capped(s, a.range.hi));
  const ScoutState st = state_of(a);
  if (!st.fail) return upward(spec, a, st);
  const double tol = s.tolerance;
  auto narrow = [tol](double pass, double fail) { return (fail - pass) / pass <= tol * (1 + 1e-9); };
  if (!st.fail->scout) {
    // A full step failed. Scouts that passed near it flattered it (or it lies within a step's
    // noise of the limit): only full steps decide from here. With a full pass below, bisect
    // to the tolerance; else confirm one tolerance lower (a pass there is the answer), unless
    // full steps keep failing with no pass in sight: then scout lower.
    if (st.full_pass) {
      if (narrow(st.full_pass->rate, st.fail->rate)) return Finish{sweep_result(spec, a, {})};
      if (auto next = bisect(st.full_pass->rate, st.fail->rate, tol)) return full_step(spec, "refine", *next);
      return Finish{sweep_result(spec, a, {})};
    }
    if (st.pass || st.full_fails <= 2) return confirm(spec, st.fail->rate / (1 + tol));
  }
  if (!st.pass) return downward(spec, a, st);
  // The fail is a scout's: narrow the bracket with scouts, then confirm its highest pass.
  if (!narrow(st.pass->rate, st.fail->rate)) return scout_step_order(spec, between(a, *st.pass, *st.fail));
  if (st.pass->scout) return confirm(spec, st.pass->rate);
  return Finish{sweep_result(spec, a, {})};
}

int scout_progress(const JobSpec& spec, const Analysis& a) {
  const double tol = spec.sweep.tolerance;
  const ScoutState st = state_of(a);
  // From the first scout: one more to find a pass, then halvings of a 25% bracket, a confirm.
  double gap = 0.25;
  int extra = a.fixed.empty() ? 2 : 1;
  if (st.pass && st.fail) {
    gap = (st.fail->rate - st.pass->rate) / st.pass->rate;
    extra = st.pass->scout ? 1 : 0;
  }
  const int halvings = gap > tol ? static_cast<int>(std::ceil(std::log2(gap / tol))) : 0;
  return std::min(halvings + extra, std::max(spec.sweep.max_steps - a.fixed_steps_run, 1));
}

json search_block(const JobSpec& spec, const Analysis& a) {
  const bool scout = spec.sweep.search == SweepSearch::scout;
  int scouts = 0, full = 0, flattered = 0;
  const Bracket b = bracket_of(a);
  for (const auto& r : a.fixed) {
    ++(r.scout ? scouts : full);
    // A scout that passed where a full step failed at or below its rate: short steps flatter.
    if (r.scout && r.verdict == Verdict::pass && b.fail && !b.fail->scout && r.rate >= b.fail->rate) ++flattered;
  }
  json time = json::object();
  double total = 0;
  for (const auto& [phase, secs] : a.wall_by_phase) {
    time[phase] = secs;
    total += secs;
  }
  time["total"] = total;
  json j{{"mode", scout ? "scout" : "ladder"}, {"full_steps", full}, {"time_s", std::move(time)}};
  if (scout) {
    j["scout_steps"] = scouts;
    j["scout_s"] = to_s(spec.sweep.scout_duration);
    j["scouts_flattered"] = flattered;
  }
  j["resolution"] = resolution_block(b);
  return j;
}

}  // namespace capsweep::sweep

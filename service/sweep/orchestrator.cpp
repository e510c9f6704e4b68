#include "sweep/orchestrator.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "llm/session_shapes.hpp"
#include "sweep/rate_analysis.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The measured length of a fixed-rate step at `rate`: `base`, stretched so the step holds the
// samples its percentile bounds need (samples_needed().sized) as far as
// sweep.max_step_duration_s allows.
Nanos sized_duration(const JobSpec& spec, double rate, Nanos base) {
  const SweepSettings& s = spec.sweep;
  Nanos d = base;
  const auto need = samples_needed(spec.slo);
  if (need.sized > 0 && rate > 0 && std::isfinite(rate)) {
    // Sessions arrive at `rate`; each sends its turns (a dataset's conversations: at least one).
    const double per_arrival =
        spec.workload.sessions && !spec.workload.dataset ? llm::mean_session_turns(*spec.workload.sessions) : 1.0;
    const double want_s = static_cast<double>(need.sized) / (rate * std::max(1.0, per_arrival));
    // Past the longest step allowed the length is that (a tiny rate would overflow Nanos).
    const Nanos most = s.max_step_duration - s.warmup;
    if (want_s > to_s(most)) {
      d = std::max(d, most);
    } else if (want_s > to_s(d)) {
      d = std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(want_s));
    }
  }
  const Nanos most = s.max_step_duration - s.warmup;
  if (d > most) d = std::max(most, std::min(base, s.step_duration));
  return d;
}

// The measured length a step stopped "decided" may run to: step.max_s (times `factor`), by
// default twice the fixed-length step's, within sweep.max_step_duration_s.
Nanos decided_max(const JobSpec& spec, double rate, int factor) {
  const Nanos most = spec.sweep.max_step_duration - spec.sweep.warmup;
  const Nanos want =
      spec.step.max ? *spec.step.max * factor : sized_duration(spec, rate, spec.sweep.step_duration * factor) * 2;
  return std::max(std::min(want, most), std::min(spec.sweep.step_duration, most));
}

}  // namespace

StepOrder rate_step_order(const JobSpec& spec, StepKind kind, std::string phase, double rate, int factor) {
  StepOrder o;
  o.kind = kind;
  o.phase = std::move(phase);
  o.rate_rps = rate;
  o.decided = spec.step.stop == StepStop::decided;
  o.duration =
      o.decided ? decided_max(spec, rate, factor) : sized_duration(spec, rate, spec.sweep.step_duration * factor);
  o.warmup = spec.sweep.warmup;
  o.concurrency = spec.sweep.max_concurrency;
  return o;
}

StepOrder scout_step_order(const JobSpec& spec, double rate) {
  StepOrder o;
  o.kind = StepKind::refine;
  o.phase = "scout";
  o.scout = true;
  o.rate_rps = rate;
  o.duration = sized_duration(spec, rate, spec.sweep.scout_duration);
  o.warmup = spec.sweep.scout_warmup;
  o.concurrency = spec.sweep.max_concurrency;
  return o;
}

namespace {

// Folds a re-run into the first result at its rate still waiting for one.
void fold_rerun(Analysis& a, const StepOutcome& again) {
  for (auto& r : a.fixed) {
    if (r.via_rerun || r.rate != again.offered_rate_rps) continue;
    if (r.rerun_for == RerunReason::none) {
      if (r.verdict == Verdict::pass) continue;
      r.rerun_for = RerunReason::non_monotone;  // asked for once a higher rate had passed
    }
    r.via_rerun = true;
    r.step = &again;
    r.verdict = again.verdict == Verdict::pass ? Verdict::pass : Verdict::fail;
    a.inconclusive_twice |= again.verdict == Verdict::inconclusive;
    if (again.unavailable && r.rerun_for == RerunReason::unavailable) a.unavailable_twice.push_back(&again);
    if (r.rerun_for == RerunReason::non_monotone) ++a.non_monotone_reruns;
    return;
  }
}

// A failing rate below a passing one is non-monotone evidence (an outage, a noisy neighbour):
// it is re-run once before it may define the bracket.
// Scouts are never re-run: their fails only steer the search, and their passes claim nothing.
void ask_non_monotone_reruns(Analysis& a) {
  for (auto& r : a.fixed) {
    if (r.scout || r.verdict == Verdict::pass || r.via_rerun || r.rerun_for != RerunReason::none) continue;
    const bool passed_above = std::any_of(a.fixed.begin(), a.fixed.end(), [&](const RateResult& o) {
      return !o.scout && o.verdict == Verdict::pass && o.rate > r.rate;
    });
    if (passed_above) r.rerun_for = RerunReason::non_monotone;
  }
}

}  // namespace

Analysis analyse(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  Analysis a;
  for (const StepOutcome& s : steps) {
    const std::string phase = s.summary.value("phase", std::string(to_string(s.kind)));
    a.wall_by_phase[phase] += s.wall_s;
    if (s.kind == StepKind::baseline) {
      a.baseline = &s;
      continue;
    }
    if (s.kind == StepKind::probe) {
      a.probe = &s;
      continue;
    }
    if (s.kind == StepKind::check) {
      a.check = &s;
      continue;
    }
    ++a.fixed_steps_run;
    a.generator_limited |= s.generator_limited;
    if (s.scout) {
      // Inconclusive counts as failing, and is not re-run: the search moves below it.
      a.fixed.push_back({s.offered_rate_rps, s.verdict == Verdict::pass ? Verdict::pass : Verdict::fail, &s});
      a.fixed.back().scout = true;
      continue;
    }
    if (s.rerun) {
      fold_rerun(a, s);
      continue;
    }
    RateResult r{s.offered_rate_rps, s.verdict, &s};
    // Counted as failing until a re-run says otherwise (and if it can never be re-run).
    if (s.verdict == Verdict::inconclusive) {
      r.verdict = Verdict::fail;
      r.rerun_for = RerunReason::inconclusive;
    } else if (s.unavailable) {
      r.rerun_for = RerunReason::unavailable;
    }
    if (s.kind == StepKind::ladder) {
      if (a.ladder_done < spec.sweep.steps)
        ++a.ladder_done;
      else
        r.escalation = true;
    }
    a.fixed.push_back(r);
  }
  ask_non_monotone_reruns(a);
  for (const auto& r : a.fixed) {
    if (r.rerun_for == RerunReason::none || r.via_rerun) continue;
    // An inconclusive step gets twice the time; the others the same length again.
    a.pending_rerun =
        rate_step_order(spec, r.step->kind, "rerun", r.rate, r.rerun_for == RerunReason::inconclusive ? 2 : 1);
    a.pending_rerun->rerun = true;
    break;
  }
  if (a.baseline && a.probe) {
    a.range = ladder_range(a.baseline->measured_rate_rps, a.probe->measured_rate_rps);
    if (spec.sweep.search == SweepSearch::ladder) a.ladder = ladder_plan(spec.sweep, a.range);
  }
  return a;
}

Bracket bracket_of(const Analysis& a) {
  Bracket b;
  for (const auto& r : a.fixed) {
    if (!r.scout && r.verdict != Verdict::pass && (!b.fail || r.rate < b.fail->rate)) b.fail = &r;
  }
  for (const auto& r : a.fixed) {
    if (!r.scout && r.verdict == Verdict::pass && (!b.fail || r.rate < b.fail->rate) &&
        (!b.pass || r.rate > b.pass->rate)) {
      b.pass = &r;
    }
  }
  // A scout's fail above the claimed pass (or with none) bounds the answer too.
  for (const auto& r : a.fixed) {
    if (r.scout && r.verdict != Verdict::pass && (!b.pass || r.rate > b.pass->rate) &&
        (!b.fail || r.rate < b.fail->rate)) {
      b.fail = &r;
    }
  }
  return b;
}

int trailing_failures(const Analysis& a) {
  int n = 0;
  for (auto it = a.fixed.rbegin(); it != a.fixed.rend(); ++it) {
    if (it->escalation) continue;
    if (it->verdict == Verdict::pass) break;
    ++n;
  }
  return n;
}

LadderRange ladder_range(double r_sync, double r_max) {
  LadderRange r{r_sync, r_max, false};
  if (!(r_max > 1.1 * r_sync)) {
    const double base = std::max(r_sync, r_max);
    r = {0.5 * base, 1.5 * base, true};
  }
  return r;
}

std::vector<double> ladder_plan(const SweepSettings& s, const LadderRange& range) {
  std::vector<double> rates;
  if (s.steps > 1) {
    auto inner = ladder_rates(range.lo, range.hi, s.steps - 1, s.spacing);
    if (inner) rates = *inner;
  }
  rates.push_back(range.hi);
  if (s.max_rate_rps) {
    for (double& r : rates) r = std::min(r, *s.max_rate_rps);
    rates.erase(std::unique(rates.begin(), rates.end()), rates.end());
  }
  return rates;
}

namespace {

StepOrder check_order(const JobSpec& spec) {
  StepOrder o;
  o.kind = StepKind::check;
  o.phase = "check";
  o.rate_rps = spec.check.rate_rps;
  o.duration = spec.arrival.process == ArrivalProcess::all_at_once ? Nanos{0} : spec.check.duration;
  o.warmup = spec.check.warmup;
  o.requests = spec.check.requests;
  o.concurrency = spec.check.max_concurrency;
  if (spec.check.concurrency > 0) {
    o.closed_loop = true;
    o.concurrency = spec.check.concurrency;
    o.rate_rps = 0;
  }
  return o;
}

// The two count-based steps before the ladder: the synchronous baseline, then the probe;
// nullopt once both have run and succeeded.
std::optional<Action> opening_step(const SweepSettings& s, const Analysis& a) {
  if (!a.baseline) {
    StepOrder o;
    o.kind = StepKind::baseline;
    o.phase = "baseline";
    o.requests = s.baseline_requests;
    o.concurrency = 1;
    return o;
  }
  if (a.baseline->completed == 0 || !(a.baseline->measured_rate_rps > 0)) {
    return Fail{"baseline: no request succeeded against the target (" + std::to_string(a.baseline->measured) +
                " sent); check target.base_url, target.model and the server's logs"};
  }
  if (!a.probe) {
    StepOrder o;
    o.kind = StepKind::probe;
    o.phase = "probe";
    o.rate_rps = kInf;
    o.requests = s.probe_requests;
    o.concurrency = static_cast<std::uint32_t>(std::min<std::uint64_t>(s.probe_concurrency, s.probe_requests));
    return o;
  }
  if (a.probe->completed == 0 || !(a.probe->measured_rate_rps > 0)) {
    return Fail{"throughput probe: no request succeeded (" + std::to_string(a.probe->measured) + " sent)"};
  }
  return std::nullopt;
}

// After the ladder: escalate while everything passes, halve down while nothing does, else
// bisect the bracket to the tolerance; finish when none applies.
Action after_ladder(const JobSpec& spec, const Analysis& a, std::vector<std::string>& warnings) {
  const SweepSettings& s = spec.sweep;
  const Bracket b = bracket_of(a);
  double tried_max = 0, tried_min = kInf;
  for (const auto& f : a.fixed) {
    tried_max = std::max(tried_max, f.rate);
    tried_min = std::min(tried_min, f.rate);
  }
  if (!b.fail) {
    // Every rate passed: escalate above the probe's rate until one fails.
    if (s.max_rate_rps && tried_max >= *s.max_rate_rps * (1 - 1e-9)) {
      warnings.push_back("every rate up to sweep.max_rate_rps passed: the capacity is above it");
      return Finish{sweep_result(spec, a, warnings)};
    }
    double next = tried_max * s.escalation_factor;
    if (s.max_rate_rps) next = std::min(next, *s.max_rate_rps);
    return rate_step_order(spec, StepKind::ladder, "escalate", next, 1);
  }
  if (!b.pass) {
    // Nothing passed below the lowest failing rate: halve down, to a floor of r_lo / 8.
    const double next = std::min(tried_min, b.fail->rate) / 2;
    if (next < a.range.lo / 8) {
      warnings.push_back("no rate down to " + std::to_string(next * 2) + " req/s met the SLO");
      return Finish{sweep_result(spec, a, warnings)};
    }
    return rate_step_order(spec, StepKind::refine, "refine", next, 1);
  }
  if (auto next = bisect(b.pass->rate, b.fail->rate, s.tolerance)) {
    return rate_step_order(spec, StepKind::refine, "refine", *next, 1);
  }
  return Finish{sweep_result(spec, a, warnings)};
}

}  // namespace

Action next_check_action(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  const Analysis a = analyse(spec, steps);
  if (a.check) return Finish{check_result(spec, *a.check)};
  return check_order(spec);
}

Action next_rate_action(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  const Analysis a = analyse(spec, steps);
  const SweepSettings& s = spec.sweep;
  if (auto opening = opening_step(s, a)) return *opening;

  std::vector<std::string> warnings;
  if (a.fixed_steps_run >= s.max_steps) {
    warnings.push_back("max_steps (" + std::to_string(s.max_steps) + ") used before the bracket reached the tolerance");
    return Finish{sweep_result(spec, a, warnings)};
  }
  if (a.pending_rerun) return *a.pending_rerun;
  if (s.search == SweepSearch::scout) return next_scout_action(spec, a);
  // Ladder: the planned rates in order, until `stop_after_failures` fail in a row.
  if (a.ladder_done < static_cast<int>(a.ladder.size()) && trailing_failures(a) < s.stop_after_failures) {
    return rate_step_order(spec, StepKind::ladder, "ladder", a.ladder[a.ladder_done], 1);
  }
  return after_ladder(spec, a, warnings);
}

Plan rate_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  Plan p;
  const int done = static_cast<int>(steps.size());
  const Analysis a = analyse(spec, steps);
  const SweepSettings& s = spec.sweep;
  const auto action = next_rate_action(spec, steps);
  if (!std::holds_alternative<StepOrder>(action)) {
    p.steps_planned = done;
    p.phase = "done";
    return p;
  }
  p.phase = std::get<StepOrder>(action).phase;
  if (s.search == SweepSearch::scout && a.baseline && a.probe) {
    p.steps_planned = done + std::max(scout_progress(spec, a), 1);
    return p;
  }
  int remaining = 0;
  if (!a.baseline)
    remaining += 2;
  else if (!a.probe)
    remaining += 1;
  const int ladder_left = a.ladder.empty() ? s.steps : static_cast<int>(a.ladder.size()) - a.ladder_done;
  if (trailing_failures(a) < s.stop_after_failures) remaining += std::max(ladder_left, 0);
  // Bisection from one ladder gap to the tolerance.
  double gap = 1.0 / std::max(s.steps, 1);
  const Bracket b = bracket_of(a);
  if (b.pass && b.fail) gap = (b.fail->rate - b.pass->rate) / b.pass->rate;
  const int bisections = gap > s.tolerance ? static_cast<int>(std::ceil(std::log2(gap / s.tolerance))) : 0;
  remaining += std::max(bisections, 0);
  if (p.phase == "rerun" || p.phase == "escalate") remaining = std::max(remaining, 1 + bisections);
  remaining = std::min(remaining, 2 + s.max_steps - a.fixed_steps_run);
  p.steps_planned = done + std::max(remaining, 1);
  return p;
}

}  // namespace capsweep::sweep

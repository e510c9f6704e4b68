#include "sweep/regression.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/compare.hpp"
#include "core/random.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

// `v` to the nearest multiple of `unit` (1e-3: three decimals), as the closest double to it.
json rounded(double v, double unit = 1e-3) {
  if (!std::isfinite(v)) return nullptr;
  const double scale = std::round(1 / unit);
  return std::round(v * scale) / scale;
}

std::string_view to_string(ChangeVerdict v) {
  return v == ChangeVerdict::pass ? "pass" : v == ChangeVerdict::fail ? "fail" : "inconclusive";
}

int severity(std::string_view verdict) {
  return verdict == "fail" ? 2 : verdict == "inconclusive" ? 1 : 0;
}

// The quality passes: each side once, and again when determinism is checked.
struct QualityPass {
  Role role;
  int pass;
};
std::vector<QualityPass> quality_passes(const JobSpec& spec) {
  if (!spec.quality) return {};
  std::vector<QualityPass> out{{Role::baseline, 0}, {Role::candidate, 0}};
  if (spec.quality->has(QualityCheck::determinism)) {
    out.push_back({Role::baseline, 1});
    out.push_back({Role::candidate, 1});
  }
  return out;
}

const StepOutcome* find_step(const std::vector<StepOutcome>& steps, StepKind kind, Role role, int round) {
  for (const auto& s : steps) {
    if (s.kind == kind && s.role == role && s.round == round) return &s;
  }
  return nullptr;
}

// A look at the evidence: after `rounds` complete rounds, spending `alpha`.
struct Look {
  int rounds;
  double alpha;
};

int max_rounds(const JobSpec& spec) {
  return std::max(spec.regression.rounds, spec.regression.max_rounds);
}

// Sequential rounds look after rounds, rounds + 1, ... max_rounds: alpha is spent evenly over
// the looks (Bonferroni), so the chance of any false verdict over all of them stays within it.
double alpha_per_look(const JobSpec& spec) {
  return spec.regression.alpha / (max_rounds(spec) - spec.regression.rounds + 1);
}

StepOrder run_order(const JobSpec& spec, Role role, int round, bool first) {
  const RegressionSettings& r = spec.regression;
  StepOrder o;
  o.kind = StepKind::run;
  o.phase = fmt::format("round {} {}", round + 1, to_string(role));
  o.rate_rps = r.rate_rps;
  o.duration = r.duration;
  o.warmup = r.warmup;
  o.concurrency = r.max_concurrency;
  o.role = role;
  o.round = round;
  o.pause_before = first ? Nanos{0} : r.cooldown;
  return o;
}

// A metric's value in each run of one side of the first `rounds` rounds, in round order;
// nullopt where a run lacks it.
std::vector<std::optional<double>> run_values(const std::vector<StepOutcome>& steps, int rounds, Role role,
                                              const std::string& key, bool per_request = false) {
  std::vector<std::optional<double>> out(static_cast<std::size_t>(rounds));
  for (const auto& s : steps) {
    if (s.kind != StepKind::run || s.role != role || s.round < 0 || s.round >= rounds) continue;
    auto it = s.summary.find(key);
    if (it == s.summary.end() || !it->is_number()) continue;
    double v = it->get<double>();
    if (per_request) {
      // Per request the schedule offered: what the round's draw of arrivals does to a rate is
      // taken out, so the baseline's spread shows the measurement's own noise.
      const double offered = s.summary.value("achieved_rate_rps", 0.0);
      if (!(offered > 0)) continue;
      v /= offered;
    }
    out[static_cast<std::size_t>(s.round)] = v;
  }
  return out;
}

std::vector<double> present(const std::vector<std::optional<double>>& v) {
  std::vector<double> out;
  for (const auto& x : v)
    if (x) out.push_back(*x);
  return out;
}

json result_json(const WelchResult& w, Worse worse) {
  return {{"change_pct", rounded(w.change_pct)},
          {"ci_pct", json::array({rounded(w.ci_low_pct), rounded(w.ci_high_pct)})},
          {"p_value", worse == Worse::higher ? w.p_greater : w.p_less},
          {"df", rounded(w.df)}};
}

// The run-to-run variation the comparison is exposed to, and what it does to the verdict:
// with paired rounds (`pa`, `pb`), the spread of the per-round ratios (a round's load moves
// both of its runs alike and cancels); otherwise the baseline's own runs (a rate in its
// per-request form). Beyond the threshold this measurement cannot judge the metric: never a
// pass, a fail only beyond that spread. The spread is of the first `rounds` rounds (the
// planned ones), whatever rounds were added: a range grows with the runs it spans.
ChangeVerdict judge_spread(const GateMetric& m, const JobSpec& spec, const std::vector<StepOutcome>& steps,
                           const std::vector<double>* pa, const std::vector<double>* pb, const WelchResult& chosen,
                           ChangeVerdict v, json& j, std::vector<std::string>& warnings) {
  const std::string& spread_key = m.spread_key.empty() ? m.key : m.spread_key;
  const int rounds = spec.regression.rounds;
  const double baseline_spread =
      spread_pct(present(run_values(steps, rounds, Role::baseline, spread_key, m.spread_per_offered)));
  j["baseline_spread_pct"] = rounded(baseline_spread);
  double spread = baseline_spread;
  if (pa && pb) {
    std::vector<double> ratios;
    for (std::size_t i = 0; i < pa->size() && i < static_cast<std::size_t>(rounds); ++i)
      ratios.push_back((*pb)[i] / (*pa)[i]);
    spread = spread_pct(ratios);
    j["spread_of"] = "per-round ratios";
  } else {
    j["spread_of"] = spread_key + (m.spread_per_offered ? " per request offered" : "") + " (baseline runs)";
  }
  j["spread_pct"] = rounded(spread);
  j["a_to_a_exceeds_threshold"] = spread > m.threshold_pct;
  if (spread > m.threshold_pct) {
    const double degradation = m.worse == Worse::higher ? chosen.change_pct : -chosen.change_pct;
    if (v == ChangeVerdict::pass || (v == ChangeVerdict::fail && degradation <= spread))
      v = ChangeVerdict::inconclusive;
    warnings.push_back(fmt::format(
        "{}: run-to-run variation of {:.1f}% ({}) exceeds its {:g}% threshold; this measurement cannot judge it "
        "(longer runs or more rounds)",
        m.key, spread, j["spread_of"].get<std::string>(), m.threshold_pct));
  }
  return v;
}

// One metric's verdict with every number it rests on. The test is paired when every round has
// both runs (they had the identical schedule and prompts): Student's t on the per-round
// ratios; otherwise Welch's t on the per-run values. Welch's result is shown either way.
json metric_verdict(const GateMetric& m, const JobSpec& spec, const std::vector<StepOutcome>& steps, Look look,
                    std::vector<std::string>& warnings) {
  const double alpha = look.alpha;
  const auto a_rounds = run_values(steps, look.rounds, Role::baseline, m.key);
  const auto b_rounds = run_values(steps, look.rounds, Role::candidate, m.key);
  const auto a = present(a_rounds), b = present(b_rounds);
  json j{{"baseline_runs", a},
         {"candidate_runs", b},
         {"threshold_pct", m.threshold_pct},
         {"threshold", m.threshold},
         {"worse", m.worse == Worse::higher ? "higher" : "lower"},
         {"alpha", alpha}};
  auto w = welch(a, b, alpha);
  if (w) j["welch"] = result_json(*w, m.worse);
  std::vector<double> pa, pb;
  for (std::size_t r = 0; r < a_rounds.size(); ++r) {
    if (a_rounds[r] && b_rounds[r]) {
      pa.push_back(*a_rounds[r]);
      pb.push_back(*b_rounds[r]);
    }
  }
  const bool complete = pa.size() == a_rounds.size();
  const Result<WelchResult> paired = complete ? paired_ratio(pa, pb, alpha) : Result<WelchResult>(WelchResult{});
  const bool use_paired = complete && paired.has_value();
  const Result<WelchResult>& chosen = use_paired ? paired : w;
  j["test"] = use_paired ? "paired_t_log_ratio" : "welch_t";
  if (!chosen) {
    j["verdict"] = "inconclusive";
    j["change_pct"] = j["p_value"] = nullptr;
    j["ci_pct"] = json::array({nullptr, nullptr});
    j["note"] = chosen.error().message;
    return j;
  }
  j.update(result_json(*chosen, m.worse));
  ChangeVerdict v = judge_change(*chosen, m.threshold_pct, m.worse, alpha);
  v = judge_spread(m, spec, steps, use_paired ? &pa : nullptr, use_paired ? &pb : nullptr, *chosen, v, j, warnings);
  j["verdict"] = to_string(v);
  if (v == ChangeVerdict::inconclusive && !j.contains("note"))
    j["note"] = "the interval straddles the threshold: add rounds";
  return j;
}

// A quality rate of each side compared: fail when the candidate's rate is lower by more than
// `max_drop_pp` and Fisher's exact test finds it significant; inconclusive when the drop is
// that large but not significant (too few items); pass otherwise.
json rate_verdict(QualityTally::Count a, QualityTally::Count b, double max_drop_pp, double alpha) {
  json j{{"n", std::max(a.n, b.n)},
         {"baseline_n", a.n},
         {"candidate_n", b.n},
         {"max_drop_pp", max_drop_pp},
         {"test", "fisher_exact"}};
  if (a.n == 0 || b.n == 0) {
    j["verdict"] = "inconclusive";
    j["baseline_rate"] = j["candidate_rate"] = j["drop_pp"] = j["p_value"] = nullptr;
    j["note"] = "no item was asked for this check";
    return j;
  }
  const double ra = static_cast<double>(a.ok) / static_cast<double>(a.n);
  const double rb = static_cast<double>(b.ok) / static_cast<double>(b.n);
  const double drop = 100 * (ra - rb);
  const double p = fisher_exact_less(a.ok, a.n, b.ok, b.n);
  j["baseline_rate"] = rounded(ra, 1e-6);
  j["candidate_rate"] = rounded(rb, 1e-6);
  j["drop_pp"] = rounded(drop);
  j["p_value"] = p;
  if (drop > max_drop_pp && p < alpha) {
    j["verdict"] = "fail";
  } else if (drop > max_drop_pp) {
    j["verdict"] = "inconclusive";
    j["note"] = "the drop exceeds the bound but is not significant with this many items";
  } else {
    j["verdict"] = "pass";
  }
  return j;
}

const QualityTally* tally_of(const std::vector<std::pair<QualityPass, QualityTally>>& tallies, Role role, int pass) {
  for (const auto& [qp, t] : tallies) {
    if (qp.role == role && qp.pass == pass) return &t;
  }
  return nullptr;
}

// Items answered identically by two passes, of the items both answered.
QualityTally::Count same_answers(const QualityTally& x, const QualityTally& y) {
  QualityTally::Count c;
  for (std::size_t i = 0; i < std::min(x.answers.size(), y.answers.size()); ++i) {
    if (x.answers[i].empty() || y.answers[i].empty()) continue;
    ++c.n;
    if (x.answers[i] == y.answers[i]) ++c.ok;
  }
  return c;
}

// How far the judge's scores of the labelled answers agree with the human scores, and whether
// that is enough for it to gate: the lower end of Spearman's interval reaches min_agreement.
json judge_calibration(const JudgeSettings& judge, const QualityTally& a, double alpha) {
  if (!judge.calibration) {
    return {{"calibrated", false}, {"note", "no calibration set (judge.calibration): the judge's scores are advisory"}};
  }
  const JudgeCalibration& cal = *judge.calibration;
  std::vector<double> by_judge, by_human;
  for (std::size_t i = 0; i < cal.items.size() && i < a.calibration_scores.size(); ++i) {
    if (!a.calibration_scores[i]) continue;
    by_judge.push_back(*a.calibration_scores[i]);
    by_human.push_back(cal.items[i].human_score);
  }
  json c{{"items", cal.items.size()}, {"scored", by_judge.size()},          {"test", "spearman (Fisher z interval)"},
         {"confidence", 1 - alpha},   {"min_agreement", cal.min_agreement}, {"calibrated", false}};
  if (by_judge.size() < kMinCalibrationItems) {
    c["note"] =
        fmt::format("the judge scored {} of {} labelled answers (at least {} are needed): its scores are advisory",
                    by_judge.size(), cal.items.size(), kMinCalibrationItems);
    return c;
  }
  auto r = spearman(by_judge, by_human, alpha);
  if (!r) {
    c["note"] = r.error().message + ": the judge's scores are advisory";
    return c;
  }
  c["spearman"] = rounded(r->rho, 1e-4);
  c["ci"] = json::array({rounded(r->ci_low, 1e-4), rounded(r->ci_high, 1e-4)});
  c["calibrated"] = r->ci_low >= cal.min_agreement;
  if (!c["calibrated"].get<bool>()) {
    c["note"] = fmt::format(
        "the judge agrees with the human labels too little to gate (the interval's lower end {:.3f} is under {:g}): "
        "its scores are advisory",
        r->ci_low, cal.min_agreement);
  }
  return c;
}

json judge_verdict(const JobSpec& spec, const QualityTally& a, const QualityTally& b, double alpha) {
  std::vector<double> sa, sb;
  for (const auto& s : a.scores)
    if (s) sa.push_back(*s);
  for (const auto& s : b.scores)
    if (s) sb.push_back(*s);
  const GateMetric m{"judge_score", "max_drop_pct", Worse::lower, spec.judge->max_drop_pct, "", false};
  json j{{"baseline_scored", sa.size()},
         {"candidate_scored", sb.size()},
         {"scale", spec.judge->scale},
         {"threshold_pct", m.threshold_pct},
         {"test", "welch_t (per item)"}};
  j["calibration"] = judge_calibration(*spec.judge, a, alpha);
  j["gates"] = j["calibration"]["calibrated"];
  auto w = welch(sa, sb, alpha);
  if (!w) {
    j["verdict"] = "inconclusive";
    j["note"] = w.error().message;
    return j;
  }
  j["baseline_mean"] = rounded(w->mean_a);
  j["candidate_mean"] = rounded(w->mean_b);
  j["change_pct"] = rounded(w->change_pct);
  j["ci_pct"] = json::array({rounded(w->ci_low_pct), rounded(w->ci_high_pct)});
  j["p_value"] = w->p_less;
  j["verdict"] = to_string(judge_change(*w, m.threshold_pct, m.worse, alpha));
  return j;
}

json quality_verdicts(const JobSpec& spec, const std::vector<StepOutcome>& steps, json& judge) {
  std::vector<std::pair<QualityPass, QualityTally>> tallies;
  for (const auto& s : steps) {
    if (s.kind == StepKind::quality && s.role) tallies.push_back({{*s.role, s.round}, quality_tally_from(s.summary)});
  }
  const QualitySettings& q = *spec.quality;
  const double alpha = spec.regression.alpha;
  const QualityTally* a = tally_of(tallies, Role::baseline, 0);
  const QualityTally* b = tally_of(tallies, Role::candidate, 0);
  json out = json::object();
  if (!a || !b) return out;
  for (QualityCheck c : q.checks) {
    const std::string name(to_string(c));
    if (c == QualityCheck::determinism) {
      const QualityTally* a2 = tally_of(tallies, Role::baseline, 1);
      const QualityTally* b2 = tally_of(tallies, Role::candidate, 1);
      if (!a2 || !b2) continue;
      json v = rate_verdict(same_answers(*a, *a2), same_answers(*b, *b2), q.max_drop_pp, alpha);
      const auto cross = same_answers(*a, *b);
      v["cross_match_rate"] = cross.n ? rounded(double(cross.ok) / double(cross.n), 1e-6) : json(nullptr);
      v["note"] =
          v.value("note", std::string("baseline_rate and candidate_rate: each side's answers matching its own repeat; "
                                      "cross_match_rate: baseline vs candidate"));
      out[name] = std::move(v);
      continue;
    }
    auto get = [&](const QualityTally& t) {
      auto it = t.checks.find(name);
      return it == t.checks.end() ? QualityTally::Count{} : it->second;
    };
    const double bound = c == QualityCheck::accuracy ? q.max_accuracy_drop_pp.value_or(q.max_drop_pp) : q.max_drop_pp;
    out[name] = rate_verdict(get(*a), get(*b), bound, alpha);
  }
  if (spec.judge) judge = judge_verdict(spec, *a, *b, alpha);
  return out;
}

json runs_table(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  json runs = json::array();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const StepOutcome& s = steps[i];
    if (s.kind != StepKind::run || !s.role) continue;
    json r{{"step", i}, {"round", s.round}, {"role", to_string(*s.role)}, {"verdict", capsweep::to_string(s.verdict)}};
    for (const auto& m : spec.regression.metrics) r[m.key] = s.summary.value(m.key, json(nullptr));
    r["completed"] = s.completed;
    r["achieved_rate_rps"] = s.summary.value("achieved_rate_rps", json(nullptr));
    r["generator_limited"] = s.generator_limited;
    runs.push_back(std::move(r));
  }
  return runs;
}

json side_of(const llm::Target& t, const std::string& base_url) {
  return {{"base_url", base_url}, {"model", t.model}, {"api", std::string(llm::to_string(t.api))}};
}

// Whether both runs of each of the first `rounds` rounds are stored.
bool rounds_done(const std::vector<StepOutcome>& steps, int rounds) {
  for (int round = 0; round < rounds; ++round) {
    for (Role role : {Role::baseline, Role::candidate}) {
      if (!find_step(steps, StepKind::run, role, round)) return false;
    }
  }
  return true;
}

// The metrics' standing after `rounds` rounds: the failed ones, and the undecided ones (their
// interval straddles the threshold, and the run-to-run spread does not rule them out of
// judging: more rounds cannot change that). Settled once one failed (the regression fails
// whatever the others say) or none is undecided.
struct Standing {
  std::vector<std::string> failed, undecided, unjudgeable;
  bool settled() const noexcept { return !failed.empty() || undecided.empty(); }
};

Standing standing(const JobSpec& spec, const std::vector<StepOutcome>& steps, int rounds) {
  Standing out;
  std::vector<std::string> ignored;
  for (const auto& m : spec.regression.metrics) {
    const json v = metric_verdict(m, spec, steps, {rounds, alpha_per_look(spec)}, ignored);
    if (v["verdict"] == "fail") out.failed.push_back(m.key);
    if (v["verdict"] != "inconclusive") continue;
    (v.value("a_to_a_exceeds_threshold", false) ? out.unjudgeable : out.undecided).push_back(m.key);
  }
  return out;
}

// The rounds this regression runs: `rounds`, then (sequential) one more at a time while the
// last complete round leaves the metrics unsettled, up to max_rounds. The same from the stored
// steps however often asked: a resumed job goes on where it was.
int rounds_planned(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  int planned = spec.regression.rounds;
  while (planned < max_rounds(spec) && rounds_done(steps, planned) && !standing(spec, steps, planned).settled())
    ++planned;
  return planned;
}

// How the rounds were spent (sequential regressions): how many ran, the error each look
// spent, and why they stopped.
json sequential_of(const JobSpec& spec, const std::vector<StepOutcome>& steps, int rounds) {
  const Standing st = standing(spec, steps, rounds);
  std::string why =
      fmt::format("max_rounds ({}) reached with {} undecided", max_rounds(spec), fmt::join(st.undecided, ", "));
  if (!st.failed.empty()) {
    why = fmt::format("{} failed after {} rounds", fmt::join(st.failed, ", "), rounds);
  } else if (st.undecided.empty() && !st.unjudgeable.empty()) {
    why = fmt::format(
        "after {} rounds every metric is decided but {}, whose run-to-run spread exceeds its threshold "
        "(more rounds cannot judge it)",
        rounds, fmt::join(st.unjudgeable, ", "));
  } else if (st.undecided.empty()) {
    why = fmt::format("every metric decided after {} rounds", rounds);
  }
  return {{"min_rounds", spec.regression.rounds},
          {"max_rounds", max_rounds(spec)},
          {"rounds_run", rounds},
          {"looks", rounds - spec.regression.rounds + 1},
          {"alpha_per_look", alpha_per_look(spec)},
          {"undecided", st.undecided},
          {"unjudgeable", st.unjudgeable},
          {"stopped", why}};
}

}  // namespace

std::vector<Role> round_order(const JobSpec& spec, int round) {
  std::vector<Role> order{Role::baseline, Role::candidate};
  if (spec.regression.order == RunOrder::shuffled) {
    Rng rng(spec.workload.seed * 0x9e3779b97f4a7c15ULL + 0x5eedULL + static_cast<std::uint64_t>(round));
    if (rng.uniform_int(0, 1) == 1) std::swap(order[0], order[1]);
  }
  return order;
}

Action next_regression_action(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  bool first = steps.empty();
  const int rounds = rounds_planned(spec, steps);
  for (int round = 0; round < rounds; ++round) {
    for (Role role : round_order(spec, round)) {
      const StepOutcome* s = find_step(steps, StepKind::run, role, round);
      if (!s) return run_order(spec, role, round, first);
      if (role == Role::baseline && s->completed == 0) {
        return Fail{
            fmt::format("round {}: no request of the baseline's run succeeded ({} sent); check "
                        "baseline.target and the server's logs",
                        round + 1, s->measured)};
      }
      first = false;
    }
  }
  for (const QualityPass& qp : quality_passes(spec)) {
    if (find_step(steps, StepKind::quality, qp.role, qp.pass)) continue;
    StepOrder o;
    o.kind = StepKind::quality;
    o.phase = fmt::format("quality {}{}", to_string(qp.role), qp.pass > 0 ? " repeat" : "");
    o.role = qp.role;
    o.round = qp.pass;
    o.concurrency = spec.quality->concurrency;
    return o;
  }
  return Finish{regression_result(spec, steps)};
}

Plan regression_progress(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  Plan p;
  p.steps_planned = 2 * rounds_planned(spec, steps) + static_cast<int>(quality_passes(spec).size());
  const Action next = next_regression_action(spec, steps);
  p.phase = std::holds_alternative<StepOrder>(next) ? std::get<StepOrder>(next).phase : "done";
  return p;
}

QualityTally quality_tally_from(const json& summary) {
  QualityTally t;
  if (auto c = summary.find("checks"); c != summary.end() && c->is_object()) {
    for (const auto& [name, v] : c->items()) {
      if (v.is_object()) t.checks[name] = {v.value("n", std::uint64_t{0}), v.value("ok", std::uint64_t{0})};
    }
  }
  if (auto a = summary.find("answers"); a != summary.end() && a->is_array()) {
    for (const auto& h : *a) t.answers.push_back(h.is_string() ? h.get<std::string>() : std::string());
  }
  for (auto [key, list] : {std::pair{"scores", &t.scores}, {"calibration_scores", &t.calibration_scores}}) {
    if (auto s = summary.find(key); s != summary.end() && s->is_array()) {
      for (const auto& v : *s) list->push_back(v.is_number() ? std::optional<double>(v.get<double>()) : std::nullopt);
    }
  }
  return t;
}

namespace {

// The conditions a regression ran under: rate, arrivals, lengths, rounds and their order.
json regression_conditions(const JobSpec& spec, int rounds) {
  json order = json::array();
  for (int round = 0; round < rounds; ++round) {
    json o = json::array();
    for (Role role : round_order(spec, round)) o.push_back(to_string(role));
    order.push_back(std::move(o));
  }
  const bool own_rate = spec.arrival.process == ArrivalProcess::trace && spec.regression.rate_rps == 0;
  json trace = nullptr;
  if (spec.arrival.process == ArrivalProcess::trace) {
    // Each run replays the trace: at its own rate (arrival.speed, loop), or scaled to rate_rps and looped.
    trace = {{"dataset", spec.workload.dataset ? json(spec.workload.dataset->id) : json(nullptr)},
             {"speed", own_rate ? json(spec.arrival.speed) : json(nullptr)},
             {"loop", own_rate ? spec.arrival.loop : true}};
  }
  return {{"rate_rps", own_rate ? json(nullptr) : json(spec.regression.rate_rps)},
          {"from_sweep", spec.regression.from_sweep.empty() ? json(nullptr) : json(spec.regression.from_sweep)},
          {"arrival", to_string(spec.arrival.process)},
          {"trace", std::move(trace)},
          {"duration_s", to_s(spec.regression.duration)},
          {"warmup_s", to_s(spec.regression.warmup)},
          {"cooldown_s", to_s(spec.regression.cooldown)},
          {"rounds", rounds},
          {"order", std::move(order)},
          {"alpha", spec.regression.alpha}};
}

// Whether a timed run's generator fell behind its schedule, each such run named in a warning.
bool warn_generator_limited(const std::vector<StepOutcome>& steps, std::vector<std::string>& warnings) {
  bool limited = false;
  for (const auto& s : steps) {
    if (s.kind == StepKind::run && s.generator_limited) {
      limited = true;
      warnings.push_back(fmt::format(
          "round {} {}: the load generator fell behind its schedule, so the load claimed was not sent; a pass "
          "is inconclusive",
          s.round + 1, to_string(*s.role)));
    }
  }
  return limited;
}

}  // namespace

json regression_result(const JobSpec& spec, const std::vector<StepOutcome>& steps) {
  json r;
  r["kind"] = "regression";
  std::vector<std::string> warnings;
  if (spec.candidate && spec.candidate->base_url == spec.base_url &&
      spec.candidate->target.model == spec.target.model) {
    warnings.push_back(
        "baseline and candidate are the same target: an A/A calibration, not a comparison (a server with a prefix "
        "cache may serve a round's second run from its first, which sent the same prompts)");
  }
  json metrics = json::object();
  std::string worst = "pass";
  const int rounds = rounds_planned(spec, steps);
  const bool sequential = max_rounds(spec) > spec.regression.rounds;
  for (const auto& m : spec.regression.metrics) {
    json v = metric_verdict(m, spec, steps, {rounds, alpha_per_look(spec)}, warnings);
    if (severity(v["verdict"].get<std::string>()) > severity(worst)) worst = v["verdict"].get<std::string>();
    metrics[m.key] = std::move(v);
  }
  r["metrics"] = std::move(metrics);
  json judge;
  r["quality"] = spec.quality ? quality_verdicts(spec, steps, judge) : json::object();
  for (const auto& [name, v] : r["quality"].items()) {
    const std::string verdict = v.value("verdict", "inconclusive");
    if (severity(verdict) > severity(worst)) worst = verdict;
  }
  if (!judge.is_null()) {
    // A judge gates only once calibrated against human labels; otherwise its verdict is shown.
    const std::string jv = judge.value("verdict", "inconclusive");
    if (judge.value("gates", false)) {
      if (severity(jv) > severity(worst)) worst = jv;
    } else if (jv != "pass") {
      warnings.push_back(fmt::format("the judge's verdict ({}) is advisory: {}", jv,
                                     judge["calibration"].value("note", "it is not calibrated")));
    }
    r["judge"] = std::move(judge);
  }
  // A run that did not send the load it claims is never a pass (as in every job kind).
  const bool generator_limited = warn_generator_limited(steps, warnings);
  if (generator_limited && worst == "pass") worst = "inconclusive";
  r["generator_limited"] = generator_limited;
  r["verdict"] = worst;
  r["baseline"] = side_of(spec.target, spec.base_url);
  if (spec.candidate) r["candidate"] = side_of(spec.candidate->target, spec.candidate->base_url);
  r["conditions"] = regression_conditions(spec, rounds);
  if (sequential) r["sequential"] = sequential_of(spec, steps, rounds);
  r["runs"] = runs_table(spec, steps);
  r["warnings"] = warnings;
  r["basis"] = spec.basis;
  return r;
}

}  // namespace capsweep::sweep

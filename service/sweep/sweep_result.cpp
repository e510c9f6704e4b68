// A rate sweep's result and a check's, from the analysed steps: the max SLO rate and its
// bracket, the knee, the saturation rate, the warnings that change how far the numbers can be
// trusted, and MLPerf's name for what was measured.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "sweep/rate_analysis.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;
constexpr double kInf = std::numeric_limits<double>::infinity();

json block_of(const StepOutcome& s, std::initializer_list<const char*> keys) {
  json j = json::object();
  for (const char* k : keys) {
    auto it = s.summary.find(k);
    j[k] = it != s.summary.end() ? *it : json(nullptr);
  }
  return j;
}

// The knee of `metric` against offered rate over the fixed-rate steps.
json knee_block(const Analysis& a, const std::string& metric, json& r) {
  std::vector<std::pair<double, double>> points;
  for (const auto& f : a.fixed) {
    auto it = f.step->summary.find(metric);
    if (it != f.step->summary.end() && it->is_number() && std::isfinite(it->get<double>())) {
      points.emplace_back(f.rate, it->get<double>());
    }
  }
  const auto knee = fit_knee(points);
  r["knee_rate_rps"] = knee ? json(knee->x) : json(nullptr);
  return {{"metric", metric},
          {"points", points.size()},
          {"slope_before", knee ? json(knee->slope_before) : json(nullptr)},
          {"slope_after", knee ? json(knee->slope_after) : json(nullptr)},
          {"method", "two-segment least-squares fit of the metric against offered rate"}};
}

// The lowest rate whose step witnessed saturation (completion shortfall beyond noise, a
// growing client backlog or server queue); a bare completions/offered ratio under 0.9 is
// noise on a short step and is not enough, and an outage is not saturation.
std::optional<double> saturation_rate(const Analysis& a) {
  std::optional<double> saturation;
  for (const auto& f : a.fixed) {
    if (f.step->saturated && !f.step->unavailable && (!saturation || f.rate < *saturation)) saturation = f.rate;
  }
  return saturation;
}

std::string outage_warning(const StepOutcome& s) {
  std::string classes;
  const json out = s.summary.value("outage", json::object());
  const json errors = out.value("errors", json::object());
  for (const auto& [k, v] : errors.items()) {
    classes += fmt::format("{}{}: {}", classes.empty() ? "" : ", ", k, v.dump());
  }
  std::string replicas;
  for (const auto& r : out.value("replicas", json::array())) {
    replicas += fmt::format("{}{}", replicas.empty() ? "; replicas failing: " : ", ",
                            r.is_string() ? r.get<std::string>() : r.dump());
  }
  return fmt::format(
      "target unavailable: the step at {:.3g} req/s and its re-run failed on connection, 5xx or cut-stream errors "
      "({}; between {:.1f} s and {:.1f} s of the re-run{}): that verdict is about availability, not capacity",
      s.offered_rate_rps, classes, out.value("first_error_s", 0.0), out.value("last_error_s", 0.0), replicas);
}

// Warnings that change how far the numbers can be trusted.
// A step whose server's usage and stream disagreed on its output tokens (summary's
// output_tokens_check): nullopt when they agreed or the server sent no usage.
std::optional<std::string> token_count_warning(const StepOutcome& s, std::string_view which) {
  const json check = s.summary.value("output_tokens_check", json::object());
  if (!check.value("disagree", false)) return std::nullopt;
  return fmt::format(
      "{}: the server's usage counts {} output tokens where its stream carried {} content chunks: a server counting "
      "tokens it did not stream, or chunks of several tokens; TPOT and the token throughput use the usage's count",
      which, check.value("usage_tokens", json(0)).dump(), check.value("stream_chunks", json(0)).dump());
}

void add_warnings(const JobSpec& spec, const Analysis& a, const Bracket& b, std::vector<std::string>& warnings) {
  if (a.range.probe_not_faster) {
    warnings.push_back(
        "the throughput probe was not faster than the synchronous baseline: the ladder spans 0.5x to 1.5x of it");
  }
  if (a.generator_limited)
    warnings.push_back("some steps were generator-limited: the load generator, not the target, set their pace");
  if (a.inconclusive_twice)
    warnings.push_back("a step stayed inconclusive after its longer re-run and was counted as failing");
  for (const StepOutcome* s : a.unavailable_twice) warnings.push_back(outage_warning(*s));
  if (a.non_monotone_reruns > 0) {
    warnings.push_back(
        fmt::format("{} failing rate(s) below a passing one were re-run before they could bound the answer",
                    a.non_monotone_reruns));
  }
  for (const auto& f : a.fixed) {
    if (auto w = token_count_warning(*f.step, fmt::format("the step at {:.3g} req/s", f.rate))) {
      warnings.push_back(std::move(*w));
      break;  // once: the server counts alike at every rate
    }
  }
  const auto need = samples_needed(spec.slo);
  const double longest_s = to_s(spec.sweep.max_step_duration - spec.sweep.warmup);
  const double floor_rps = longest_s > 0 ? static_cast<double>(need.decidable) / longest_s : 0;
  if (need.decidable > 0 &&
      std::any_of(a.fixed.begin(), a.fixed.end(), [&](const RateResult& f) { return f.rate < floor_rps; })) {
    warnings.push_back(fmt::format(
        "below {:.3g} req/s a step of at most {:.0f} s cannot hold the {} requests a {} verdict needs: such rates "
        "cannot pass, so the answer may be low (raise sweep.max_step_duration_s)",
        floor_rps, longest_s, need.decidable, need.percentile_name));
  }
  for (const auto& f : a.fixed) {
    if (!f.scout && f.verdict == Verdict::pass && b.fail && f.rate > b.fail->rate) {
      warnings.push_back(
          "non-monotone: a rate above the lowest failing rate passed; the answer is the highest rate with no failure "
          "below it");
      break;
    }
  }
}

// MLPerf's name for what a rate step measured: "Server" (Poisson arrivals judged against
// latency bounds), "Offline" (every request at once: batch capacity), else none.
json mlperf_scenario(const JobSpec& spec) {
  if (spec.arrival.process == ArrivalProcess::all_at_once) return "Offline";
  if (spec.arrival.process == ArrivalProcess::poisson && !spec.slo.latency.empty()) return "Server";
  return nullptr;
}

constexpr const char* kOfflineWarning =
    "MLPerf Offline: every request was sent at once, so this is batch capacity (throughput with the whole queue "
    "waiting), not interactive capacity; its latencies are not what users see at a rate";

}  // namespace

json sweep_result(const JobSpec& spec, const Analysis& a, std::vector<std::string> warnings) {
  const Bracket b = bracket_of(a);
  json r;
  r["kind"] = "sweep";
  r["max_slo_rate_rps"] = b.pass ? json(b.pass->rate) : json(nullptr);
  r["slo_bracket_rps"] =
      json::array({b.pass ? json(b.pass->rate) : json(nullptr), b.fail ? json(b.fail->rate) : json(nullptr)});
  std::string limiting;
  if (b.fail)
    limiting = b.fail->step->limiting_metric;
  else if (b.pass)
    limiting = b.pass->step->limiting_metric;
  r["limiting_metric"] = limiting.empty() ? json(nullptr) : json(limiting);
  // Knee of the limiting latency (p95 TTFT when the limit is not a latency) vs offered rate.
  const bool latency_limit = limiting.size() > 3 && limiting.compare(limiting.size() - 3, 3, "_ms") == 0;
  r["knee"] = knee_block(a, latency_limit ? limiting : "p95_ttft_ms", r);
  r["saturation_rate_rps"] = number_or_null(saturation_rate(a));

  json baseline = block_of(*a.baseline, {"completed", "mean_ttft_ms", "p50_ttft_ms", "p95_ttft_ms", "mean_tpot_ms",
                                         "p95_itl_ms", "mean_e2el_ms"});
  baseline["rate_rps"] = a.baseline->measured_rate_rps;
  r["baseline"] = baseline;
  json probe = block_of(*a.probe, {"completed", "output_throughput"});
  probe["rate_rps"] = a.probe->measured_rate_rps;
  if (auto m = a.probe->summary.find("probe"); m != a.probe->summary.end()) probe["steady"] = *m;
  probe["arrival"] = "all_at_once";  // the probe sends its requests at once: MLPerf's Offline
  probe["mlperf_scenario"] = "Offline";
  r["probe"] = probe;
  r["mlperf_scenario"] = mlperf_scenario(spec);

  json conc = nullptr;
  if (b.pass) {
    const StepOutcome& s = *b.pass->step;
    conc = {{"rate_rps", b.pass->rate},
            {"littles_law", b.pass->rate * s.mean_e2el_ms / 1000.0},
            {"server_running_waiting", number_or_null(s.server_in_system)}};
  }
  r["concurrency_at_max_slo"] = conc;
  r["ladder"] = {{"lo_rps", a.range.lo}, {"hi_rps", a.range.hi}, {"rates", a.ladder}};
  r["steps_run"] = a.fixed_steps_run + 2;
  r["search"] = search_block(spec, a);
  r["tolerance"] = spec.sweep.tolerance;
  if (spec.arrival.process == ArrivalProcess::trace) {
    // Each rate step replayed the trace looped at that mean rate: its bursts kept, its speed the step's.
    r["trace"] = {{"dataset", spec.workload.dataset ? json(spec.workload.dataset->id) : json(nullptr)},
                  {"scaled_to", "each step's rate"}};
  }
  add_warnings(spec, a, b, warnings);
  r["warnings"] = warnings;
  return r;
}

json check_result(const JobSpec& spec, const StepOutcome& s) {
  json r;
  r["kind"] = "check";
  r["verdict"] = to_string(s.verdict);
  r["target"] = {
      {"base_url", spec.base_url}, {"model", spec.target.model}, {"api", std::string(llm::to_string(spec.target.api))}};
  if (!spec.target.replicas.empty()) r["target"]["base_urls"] = spec.target.replica_urls();
  json cond;
  const bool closed_loop = spec.check.concurrency > 0;
  cond["mode"] = closed_loop ? "concurrency" : "rate";
  cond["arrival"] = closed_loop ? "closed_loop" : to_string(spec.arrival.process);
  const bool trace = spec.arrival.process == ArrivalProcess::trace;
  cond["rate_rps"] = closed_loop || trace                 ? json(nullptr)
                     : std::isfinite(spec.check.rate_rps) ? json(spec.check.rate_rps)
                                                          : json("inf");
  if (trace) {
    // A replay's rate is the trace's own: what it offered is in the observations.
    cond["trace"] = {{"speed", spec.arrival.speed},
                     {"loop", spec.arrival.loop},
                     {"dataset", spec.workload.dataset ? json(spec.workload.dataset->id) : json(nullptr)}};
  }
  if (spec.workload.sessions) {
    // Sessions arrive at rate_rps (sessions/s); their turns are the requests offered.
    cond["sessions"] = {{"history", llm::to_string(spec.workload.sessions->history)},
                        {"offered_rate_rps", s.summary.value("offered_rate_rps", json(nullptr))}};
  }
  if (closed_loop) {
    cond["concurrency"] = spec.check.concurrency;
    // What N users achieved, and how long each waited per request (the mean E2EL).
    cond["achieved_rate_rps"] = s.summary.value("achieved_rate_rps", json(nullptr));
    cond["mean_wait_per_request_ms"] = s.summary.value("mean_e2el_ms", json(nullptr));
  }
  cond["duration_s"] = to_s(spec.check.duration);
  cond["warmup_s"] = to_s(spec.check.warmup);
  cond["max_concurrency"] = spec.check.max_concurrency;
  cond["requests"] = spec.check.requests ? json(*spec.check.requests) : json(nullptr);
  r["conditions"] = cond;
  r["observations"] = s.summary;
  r["criteria"] = s.evaluation.value("criteria", json::array());
  r["limiting_metric"] = s.limiting_metric.empty() ? json(nullptr) : json(s.limiting_metric);
  r["saturated"] = s.saturated;
  r["basis"] = spec.basis;
  r["mlperf_scenario"] = closed_loop ? json(nullptr) : mlperf_scenario(spec);
  r["warnings"] = r["mlperf_scenario"] == "Offline" ? json::array({kOfflineWarning}) : json::array();
  if (auto w = token_count_warning(s, "the check")) r["warnings"].push_back(std::move(*w));
  return r;
}

}  // namespace capsweep::sweep

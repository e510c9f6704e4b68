#pragma once
// A job spec (see the README's "Job spec") converted once into settings: the target, the workload,
// the arrival process, the sweep or check parameters and the SLO. The document has been
// validated against schema/sweep-spec.schema.json before; this adds the cross-field checks
// a schema cannot express, with the same error shape.

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/compare.hpp"
#include "core/decide.hpp"
#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/schedule.hpp"
#include "core/slo.hpp"
#include "core/time.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"
#include "observe/prom_query.hpp"

namespace capsweep::sweep {

// A job's kind: its row in the kinds table (sweep/kinds.hpp), which says everything that differs
// by kind. The four kinds capsweep has are named here; a kind registered later
// (register_kind) gets the next row.
class JobKind {
 public:
  static const JobKind sweep, check, regression, scenario;
  constexpr JobKind() = default;
  static constexpr JobKind at(std::uint8_t row) noexcept {
    JobKind k;
    k.row_ = row;
    return k;
  }
  constexpr std::uint8_t row() const noexcept { return row_; }
  constexpr bool operator==(const JobKind&) const noexcept = default;

 private:
  std::uint8_t row_ = 0;
};
inline constexpr JobKind JobKind::sweep = JobKind::at(0);
inline constexpr JobKind JobKind::check = JobKind::at(1);
inline constexpr JobKind JobKind::regression = JobKind::at(2);
inline constexpr JobKind JobKind::scenario = JobKind::at(3);

// The kind's name, as in the spec's "kind", the stored row and the result: "sweep", "check",
// "regression", "scenario", or a registered kind's (the table's).
std::string_view to_string(JobKind k) noexcept;
// The kind of that name in the table; nullopt when there is none.
std::optional<JobKind> parse_job_kind(std::string_view s) noexcept;
// A rate sweep finds the highest request rate within the SLO; a concurrency sweep runs one
// closed-loop step per number of users and finds the most users within the SLO.
enum class SweepMode { rate, concurrency };
// How a rate sweep looks for its answer. ladder: K full-length rates up to the probe's, then
// escalation and bisection of full-length steps. scout: short steps locate the bracket, and
// only full-length steps may claim a passing rate (sweep/scout.hpp).
enum class SweepSearch { ladder, scout };

struct SweepSettings {
  SweepMode mode = SweepMode::rate;
  SweepSearch search = SweepSearch::ladder;
  Nanos scout_duration = std::chrono::seconds(15);            // measured part of a scout step
  Nanos scout_warmup = std::chrono::seconds(5);               // its warm-up (at most warmup)
  std::vector<std::uint32_t> levels{1, 2, 4, 8, 16, 32, 64};  // concurrency mode: users per step
  std::optional<LengthDist> think_time_ms;                    // concurrency mode: each user's pause after an answer
  int steps = 6;                                              // ladder rates K
  Nanos step_duration = std::chrono::seconds(60);             // measured part of a fixed-rate step
  Nanos warmup = std::chrono::seconds(10);                    // before it, not measured
  Spacing spacing = Spacing::linear;
  int stop_after_failures = 2;  // consecutive failing ladder steps that end escalation
  double tolerance = 0.05;      // bisection stops when (fail - pass) / pass <= tolerance
  int max_steps = 20;           // fixed-rate steps (ladder, refine, re-runs) at most
  std::uint64_t baseline_requests = 10;
  std::uint64_t probe_requests = 200;
  std::uint32_t probe_concurrency = 200;
  std::uint32_t max_concurrency = 0;   // cap on requests in flight in fixed-rate steps (0: none)
  double escalation_factor = 1.25;     // above r_max when every ladder rate passed
  std::optional<double> max_rate_rps;  // never offer more
  Nanos drain_timeout = std::chrono::seconds(30);
  // Longest a fixed-rate step may become (warm-up + measured) when it is stretched to hold
  // the samples its percentile bounds need; the service fills in its own limit.
  Nanos max_step_duration = std::chrono::seconds(3600);
};

// How a sweep's fixed-rate steps end (the "step" block): at their fixed length, or once their
// SLO verdict is decided (core/decide.hpp), after a minimum and at most a maximum.
enum class StepStop { fixed, decided };
struct StepStopSettings {
  StepStop stop = StepStop::fixed;
  DecideSettings decide;     // min_s (default: 10 s or the step's length if shorter), min_requests, looks
  std::optional<Nanos> max;  // measured part at most (default: twice the fixed step's, see stop_length)
};

struct CheckSettings {
  double rate_rps = 1;                         // +inf for all_at_once; 0 for a closed loop
  std::uint32_t concurrency = 0;               // closed loop: N users, each waits for its answer (0: rate)
  std::optional<LengthDist> think_time_ms;     // closed loop: each user's pause after an answer
  Nanos duration = std::chrono::seconds(600);  // the schema's defaults: what parse_check fills in
  Nanos warmup{0};
  std::uint32_t max_concurrency = 0;
  std::optional<std::uint64_t> requests;
  Nanos drain_timeout = std::chrono::seconds(30);
};

// A regression job's two sides: the baseline (A, what runs now) and the candidate (B, the swap).
enum class Role { baseline, candidate };
std::string_view to_string(Role r) noexcept;
std::optional<Role> parse_role(std::string_view s) noexcept;

// One metric a regression gate judges: the step summary key it reads, the threshold that
// bounds it (its name in regression.thresholds, in percent) and which way is worse.
struct GateMetric {
  std::string key;        // "request_goodput", "p95_ttft_ms", ...
  std::string threshold;  // "goodput_drop_pct", "ttft_p95_rise_pct", ...
  Worse worse = Worse::higher;
  double threshold_pct = 10;
  // What the baseline's run-to-run spread is read from: the metric itself, or for a rate the
  // per-request form that the round's draw of arrivals does not move (goodput: the share of
  // measured requests that were good; output throughput: divided by the rate achieved).
  std::string spread_key;  // "" = key
  bool spread_per_offered = false;
};
// Every threshold regression.thresholds may name, with its metric and direction; the first
// three are judged by default (goodput -5%, TTFT p95 +10%, ITL p95 +10%).
const std::vector<GateMetric>& gate_metric_catalogue();

// How the runs of a round are ordered: "alternate" runs baseline then candidate in every
// round (A B A B ...); "shuffled" flips a seeded coin per round.
enum class RunOrder { alternate, shuffled };

struct RegressionSettings {
  double rate_rps = 0;                        // filled in from from_sweep at submit when that is given
  std::string from_sweep;                     // a succeeded sweep whose max_slo_rate_rps is the rate
  Nanos duration = std::chrono::seconds(60);  // measured part of each run
  Nanos warmup = std::chrono::seconds(10);
  Nanos cooldown{0};  // pause before every run but the first
  int rounds = 3;
  // Sequential rounds: after `rounds`, one more round at a time while some metric is
  // undecided, up to this many; alpha is spent evenly over the looks. 0: `rounds`, fixed.
  int max_rounds = 0;
  RunOrder order = RunOrder::alternate;
  std::vector<GateMetric> metrics;  // the thresholds judged
  double alpha = 0.05;
  std::uint32_t max_concurrency = 0;  // cap on requests in flight (0: none)
  Nanos drain_timeout = std::chrono::seconds(30);
};

// The quality checks of a regression job, run on both targets at temperature 0 apart from
// the timed runs, over the items of a stored dataset.
enum class QualityCheck { json, json_schema, tool_calls, max_length, determinism, accuracy };
std::string_view to_string(QualityCheck c) noexcept;
std::optional<QualityCheck> parse_quality_check(std::string_view s) noexcept;

struct QualitySettings {
  llm::DatasetRef dataset;  // its id and (filled in at submit) sha256
  std::vector<QualityCheck> checks;
  double max_drop_pp = 1;                      // a candidate rate this much lower (and significant) fails
  std::optional<double> max_accuracy_drop_pp;  // accuracy's own bound (default: max_drop_pp)
  std::uint32_t concurrency = 4;               // quality requests in flight
  std::uint32_t max_tokens = 256;              // for items that give none
  std::uint32_t max_items = 0;                 // the first N items (0: all)
  bool has(QualityCheck c) const noexcept;
};

// A model that scores each answer against the item's reference (off unless given).
// One human-labelled answer of a judge's calibration set.
struct JudgeLabel {
  std::string question, reference, answer;
  double human_score = 0;  // on the judge's scale
};

// A judge gates the regression verdict only once its scores agree with human labels: the
// labelled answers are scored by the judge first, and the lower end of the interval of
// Spearman's rank correlation (at 1 - alpha) must reach `min_agreement`.
inline constexpr std::size_t kMinCalibrationItems = 10, kMaxCalibrationItems = 1000;
struct JudgeCalibration {
  std::vector<JudgeLabel> items;
  double min_agreement = 0.6;
};

struct JudgeSettings {
  llm::Target target;
  std::string base_url;
  std::string template_text;                    // with {question}, {reference} and {answer}
  std::uint32_t scale = 10;                     // scores 1..scale
  double max_drop_pct = 5;                      // the candidate's mean score this much lower (and significant) fails
  std::optional<JudgeCalibration> calibration;  // none: the judge's scores are advisory
};

// One segment of a scenario's profile as written: a rate, or a multiple of the capacity.
struct ScenarioSegment {
  Nanos duration{0};
  std::optional<double> rate_rps, capacity_x, to_rate_rps, to_capacity_x;
  std::optional<double> amplitude_rps, amplitude_x;
  Nanos period{0};
};

// The checks a scenario judges (only those named; each needs what it observes).
struct ScenarioChecks {
  std::optional<double> scale_up_reaction_max_s;
  struct Slo {
    double max_error_rate = 0.01;
    double ttft_p95_ms = 5000;
  };
  std::optional<Slo> slo_during_scale_up;
  struct Recovery {
    double max_s = 600;
    int windows = 3;
  };
  std::optional<Recovery> recovery;
  struct ColdStart {
    double expected_s = 0;
    double tolerance_pct = 20;
  };
  std::optional<ColdStart> cold_start;
  struct Readiness {
    double window_s = 10;
    std::optional<double> max_ttft_ms;  // default: 5 x the unloaded TTFT p95 measured at the start
  };
  std::optional<Readiness> readiness;
  std::optional<std::uint64_t> scale_down_max_cut_streams;
  std::optional<int> flapping_max_direction_changes;
  bool metric_choice = false;
};

// Where the replica counts come from: a Prometheus server's instant queries, or gauges of the
// target's metrics text (summed over series).
struct ReplicaSource {
  std::optional<observe::PromSource> prometheus;  // queries "ready", "desired", "serving"
  std::map<std::string, std::string> metric;      // "ready" -> gauge name, ...
};

struct ScenarioSettings {
  std::optional<double> capacity_rps;  // filled in from from_sweep at submit when that is given
  std::string from_sweep;
  std::vector<ScenarioSegment> segments;
  Nanos window = std::chrono::seconds(5);
  std::string readiness_url;
  std::optional<ReplicaSource> replicas;
  ScenarioChecks checks;
  Nanos drain_timeout = std::chrono::seconds(30);
  std::uint32_t max_concurrency = 0;
};

// The profile of a scenario in requests per second (capacity multiples resolved); errors name
// the segment's field ("/scenario/profile/2/capacity_x" without a capacity).
Result<Profile> scenario_profile(const ScenarioSettings& s);

// The candidate side of a regression job (the baseline is the job's own target).
struct CandidateTarget {
  llm::Target target;
  std::string base_url;
  std::string metrics_url;
  std::optional<observe::PromSource> prometheus;
};

// The most load agents one job may ask for.
inline constexpr std::int64_t kMaxAgents = 256;

struct JobSpec {
  JobKind kind = JobKind::sweep;
  std::string name;
  llm::Target target;
  std::string base_url;     // as given, the queue key (one sweep per target at a time)
  std::string metrics_url;  // "" = no scraping
  // target.prometheus: the gauges from a Prometheus server's queries instead of metrics_url.
  std::optional<observe::PromSource> prometheus;
  llm::WorkloadSpec workload;
  ArrivalSpec arrival;
  SweepSettings sweep;
  StepStopSettings step;
  CheckSettings check;
  SloSpec slo;
  // kind regression: the target above is the baseline's (baseline.target).
  std::optional<CandidateTarget> candidate;
  RegressionSettings regression;
  std::optional<QualitySettings> quality;
  std::optional<JudgeSettings> judge;
  std::optional<ScenarioSettings> scenario;
  std::string basis;
  // A kind registered outside the four: its own block, as its parser keeps it.
  nlohmann::json kind_settings;
  // Load agents (capsweep-agent) sharing each load step by index; 0: capsweepd's own engine.
  std::uint32_t agents = 0;
  // report.percentiles: the percentiles exports show (sorted, distinct, each in (0, 100)).
  std::vector<double> report_percentiles{50, 90, 95, 99, 99.9};
};

// Where the target of each side sits in the spec: "/target" for sweeps and checks,
// "/baseline/target" and "/candidate/target" for a regression job.
std::string target_field(const JobSpec& spec, Role role = Role::baseline);

// The URLs besides the target's that a job reads (metrics_url, target.prometheus.url), each
// with its field: every one must pass the allow-list as the target does.
std::vector<std::pair<std::string, std::string>> side_urls(const JobSpec& spec);

// The first address of the job that `allows` refuses: the target's host, or a side URL (its
// field and the URL); none when every one passes. The admission (403 naming the field) and
// the re-check when a job starts (the allow-list may have changed) both ask it.
struct RefusedHost {
  bool target = false;  // the target's own host
  std::string field;
  std::string what;  // the host or the URL
};
std::optional<RefusedHost> refused_host(const JobSpec& spec, const std::function<bool(std::string_view)>& allows);

// The percentiles a step summary carries: the report's, those the SLO names, and the ones the
// service itself reads (p50, p95, p99), sorted and distinct.
std::vector<double> summary_percentiles(const JobSpec& spec);

// Parses the regression, quality and judge blocks of a regression job (regression_spec.cpp).
std::optional<Error> parse_regression_blocks(const nlohmann::json& spec, JobSpec& js);
// Parses the scenario block of a scenario job (scenario_spec.cpp).
std::optional<Error> parse_scenario_block(const nlohmann::json& spec, JobSpec& js);

// Whether a trace is replayed at its own rate in this job (arrival.speed, looped or cut as
// arrival.loop says): a check, or a regression with no rate of its own. Elsewhere the job's
// rates scale it (a sweep's steps, a regression's rate_rps, a scenario's profile).
bool trace_at_own_rate(const JobSpec& js) noexcept;

// vLLM's rule for `arrival.burstiness`: given (and not 1) without `arrival.process`, it means
// gamma arrivals of that shape, and the document is completed to say so ("process": "gamma"),
// so the stored record names what was sent. Call before the schema's defaults are applied
// (they would fill in "poisson"). A document without an arrival object is left alone.
void complete_arrival(nlohmann::json& spec);

// Parses a schema-valid spec. Cross-field errors: burstiness other than 1 with a process
// that is not gamma ("/arrival/burstiness": it would not be sent), warmup_s >= step_duration_s
// ("/sweep/warmup_s"), check warmup >= duration ("/check/warmup_s"), all_at_once without
// "requests" ("/check/requests"), all_at_once in a sweep ("/arrival/process"),
// probe_concurrency > probe_requests is clipped, not an error.
Result<JobSpec> parse_job_spec(const nlohmann::json& spec);

// The spec as stored and returned: the headers of every target (target, baseline.target,
// candidate.target, judge.target) with their values replaced (values are secrets), and the
// secrets apart: {"Header": "value"} for `target`, {"/candidate/target": {...}} for the others.
struct SplitSpec {
  nlohmann::json visible;
  nlohmann::json secret_headers;  // {"Authorization": "Bearer ..."} or {}
};
SplitSpec split_secrets(nlohmann::json spec);
// Puts the secret headers back for the run.
nlohmann::json join_secrets(nlohmann::json visible, const nlohmann::json& secret_headers);

}  // namespace capsweep::sweep

#pragma once
// A job spec (see the README's "Job spec") converted once into settings: the target, the workload,
// the arrival process, the sweep or check parameters and the SLO. The document has been
// validated against schema/sweep-spec.schema.json before; this adds the cross-field checks
// a schema cannot express, with the same error shape.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/plan.hpp"
#include "core/schedule.hpp"
#include "core/slo.hpp"
#include "core/time.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"
#include "observe/prom_query.hpp"

namespace capsweep::sweep {

enum class JobKind { sweep, check };
// A rate sweep finds the highest request rate within the SLO; a concurrency sweep runs one
// closed-loop step per number of users and finds the most users within the SLO.
enum class SweepMode { rate, concurrency };

struct SweepSettings {
  SweepMode mode = SweepMode::rate;
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
  CheckSettings check;
  SloSpec slo;
  std::string basis;
  // report.percentiles: the percentiles exports show (sorted, distinct, each in (0, 100)).
  std::vector<double> report_percentiles{50, 90, 95, 99, 99.9};
};

// The URLs besides the target's that a job reads (metrics_url, target.prometheus.url), each
// with its field: every one must pass the allow-list as the target does.
std::vector<std::pair<std::string, std::string>> side_urls(const JobSpec& spec);

// The percentiles a step summary carries: the report's, those the SLO names, and the ones the
// service itself reads (p50, p95, p99), sorted and distinct.
std::vector<double> summary_percentiles(const JobSpec& spec);

// Parses a schema-valid spec. Cross-field errors: warmup_s >= step_duration_s
// ("/sweep/warmup_s"), check warmup >= duration ("/check/warmup_s"), all_at_once without
// "requests" ("/check/requests"), all_at_once in a sweep ("/arrival/process"),
// probe_concurrency > probe_requests is clipped, not an error.
Result<JobSpec> parse_job_spec(const nlohmann::json& spec);

// The spec as stored and returned: `target.headers` replaced by the header names only
// (values are secrets), and the secrets apart.
struct SplitSpec {
  nlohmann::json visible;
  nlohmann::json secret_headers;  // {"Authorization": "Bearer ..."} or {}
};
SplitSpec split_secrets(nlohmann::json spec);
// Puts the secret headers back for the run.
nlohmann::json join_secrets(nlohmann::json visible, const nlohmann::json& secret_headers);

}  // namespace capsweep::sweep

// What a job may ask of this service: its lengths, steps, rates and requests within the
// service's limits, its CA files within tls_ca_dir, every host it contacts in allow_targets.
#include "api/admission.hpp"

#include <fmt/format.h>

#include <filesystem>

#include "llm/target.hpp"
#include "llm/workload.hpp"

namespace capsweep::api {

namespace {

using json = nlohmann::json;

ApiError over(std::string field, std::string what) {
  return api_error(errc::invalid_argument, std::move(what), std::move(field));
}

// A length distribution without an upper bound gets the service's limit as its max (shown
// in the stored spec); one that can exceed the limit is refused.
std::optional<ApiError> bound_lengths(const LengthDist& dist, json& workload, const char* key, std::uint32_t limit,
                                      const std::string& field) {
  if (dist.upper_bound() <= limit) return std::nullopt;
  json& d = workload[key];
  const std::string kind = d.value("dist", "");
  if ((kind == "normal" || kind == "lognormal") && !d.contains("max")) {
    d["max"] = limit;
    return std::nullopt;
  }
  return over(field, fmt::format("may ask for up to {} tokens; the service's limit is {}", dist.upper_bound(), limit));
}

// Expected requests of one fixed-rate step of `length` seconds at `rate_rps`.
double expected_requests(double rate_rps, double length_s) {
  return rate_rps * length_s;
}

// The service's limits, on the parsed spec; may fill limits into the stored document.
// A sweep's steps against the service's limits; fills in the limits the spec leaves open.
std::optional<ApiError> check_sweep_limits(const Limits& l, const sweep::SweepSettings& s, json& doc) {
  const auto max_requests = static_cast<double>(l.max_requests_per_step);
  const double step_s = to_s(s.warmup + s.step_duration);
  if (step_s > l.max_step_duration_s) {
    return over("/sweep/step_duration_s",
                fmt::format("warm-up + step exceed the service's limit of {} s per step", l.max_step_duration_s));
  }
  if (s.max_rate_rps && *s.max_rate_rps > l.max_rate_rps) {
    return over("/sweep/max_rate_rps", fmt::format("exceeds the service's limit of {} req/s", l.max_rate_rps));
  }
  const double top = s.max_rate_rps.value_or(l.max_rate_rps);
  if (expected_requests(top, step_s) > max_requests) {
    return over(
        s.max_rate_rps ? "/sweep/max_rate_rps" : "/sweep/step_duration_s",
        fmt::format("a step at {} req/s for {} s would send {:.0f} requests; the service's limit is {} per step", top,
                    step_s, expected_requests(top, step_s), l.max_requests_per_step));
  }
  if (!s.max_rate_rps) doc["sweep"]["max_rate_rps"] = l.max_rate_rps;  // escalation stops there
  if (to_s(s.max_step_duration) > l.max_step_duration_s) {
    if (doc["sweep"].contains("max_step_duration_s")) {
      return over("/sweep/max_step_duration_s",
                  fmt::format("exceeds the service's limit of {} s per step", l.max_step_duration_s));
    }
    doc["sweep"]["max_step_duration_s"] = l.max_step_duration_s;  // steps stretch up to the limit
  }
  if (s.probe_requests > l.max_requests_per_step) {
    return over("/sweep/probe_requests",
                fmt::format("exceeds the service's limit of {} requests per step", l.max_requests_per_step));
  }
  if (s.probe_concurrency > l.max_connections_per_sweep) {
    return over("/sweep/probe_concurrency",
                fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  for (std::size_t i = 0; s.mode == sweep::SweepMode::concurrency && i < s.levels.size(); ++i) {
    if (s.levels[i] > l.max_connections_per_sweep) {
      return over(fmt::format("/sweep/levels/{}", i),
                  fmt::format("{} users need {} connections; the service's limit is {}", s.levels[i], s.levels[i],
                              l.max_connections_per_sweep));
    }
  }
  if (s.max_concurrency > l.max_connections_per_sweep) {
    return over("/sweep/max_concurrency",
                fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  return std::nullopt;
}

// A step stopped "decided" may run to step.max_s (by default twice the fixed step, within the
// longest step allowed): its requests at the top rate within the limit per step.
std::optional<ApiError> check_decided_limits(const Limits& l, const sweep::JobSpec& spec) {
  if (spec.step.stop != sweep::StepStop::decided) return std::nullopt;
  const Nanos longest = spec.sweep.warmup + (spec.step.max ? *spec.step.max : 2 * spec.sweep.step_duration);
  const double step_s = std::min(to_s(longest), l.max_step_duration_s);
  const double top = spec.sweep.max_rate_rps.value_or(l.max_rate_rps);
  if (expected_requests(top, step_s) > static_cast<double>(l.max_requests_per_step)) {
    return over(spec.step.max ? "/step/max_s" : "/step/stop",
                fmt::format("a decided step may run {} s at {} req/s: {:.0f} requests; the service's limit is {} per "
                            "step (set step.max_s or sweep.max_rate_rps)",
                            step_s, top, expected_requests(top, step_s), l.max_requests_per_step));
  }
  return std::nullopt;
}

// A check's one step against the service's limits.
std::optional<ApiError> check_check_limits(const Limits& l, const sweep::CheckSettings& k) {
  const auto max_requests = static_cast<double>(l.max_requests_per_step);
  if (std::isfinite(k.rate_rps) && k.rate_rps > l.max_rate_rps) {
    return over("/check/rate_rps", fmt::format("exceeds the service's limit of {} req/s", l.max_rate_rps));
  }
  const double step_s = to_s(k.warmup + k.duration);
  if (step_s > l.max_step_duration_s) {
    return over("/check/duration_s",
                fmt::format("warm-up + duration exceed the service's limit of {} s per step", l.max_step_duration_s));
  }
  if (k.requests && *k.requests > l.max_requests_per_step) {
    return over("/check/requests",
                fmt::format("exceeds the service's limit of {} requests per step", l.max_requests_per_step));
  }
  if (!k.requests && std::isfinite(k.rate_rps) && expected_requests(k.rate_rps, step_s) > max_requests) {
    return over("/check/duration_s",
                fmt::format("{} req/s for {} s would send {:.0f} requests; the service's limit is {} per step",
                            k.rate_rps, step_s, expected_requests(k.rate_rps, step_s), l.max_requests_per_step));
  }
  if (k.max_concurrency > l.max_connections_per_sweep) {
    return over("/check/max_concurrency",
                fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  if (k.concurrency > l.max_connections_per_sweep) {
    return over("/check/concurrency", fmt::format("{} users need {} connections; the service's limit is {}",
                                                  k.concurrency, k.concurrency, l.max_connections_per_sweep));
  }
  return std::nullopt;
}

// A regression job's runs against the service's limits, and its whole length against the total.
std::optional<ApiError> check_regression_limits(const ServiceConfig& config, const sweep::JobSpec& spec) {
  const Limits& l = config.limits;
  const sweep::RegressionSettings& r = spec.regression;
  if (r.rate_rps > l.max_rate_rps) {
    return over("/regression/rate_rps", fmt::format("exceeds the service's limit of {} req/s", l.max_rate_rps));
  }
  const double run_s = to_s(r.warmup + r.duration);
  if (run_s > l.max_step_duration_s) {
    return over("/regression/duration_s",
                fmt::format("warm-up + duration exceed the service's limit of {} s per step", l.max_step_duration_s));
  }
  if (expected_requests(r.rate_rps, run_s) > static_cast<double>(l.max_requests_per_step)) {
    return over("/regression/duration_s",
                fmt::format("{} req/s for {} s would send {:.0f} requests a run; the service's limit is {} per step",
                            r.rate_rps, run_s, expected_requests(r.rate_rps, run_s), l.max_requests_per_step));
  }
  if (r.max_concurrency > l.max_connections_per_sweep) {
    return over("/regression/max_concurrency",
                fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  if (spec.quality && spec.quality->concurrency > l.max_connections_per_sweep) {
    return over("/quality/concurrency",
                fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  const double total_s = 2.0 * r.rounds * (run_s + to_s(r.cooldown));
  if (total_s > config.limits.max_total_sweep_s) {
    return over("/regression/rounds",
                fmt::format("{} rounds of two {:.0f}-s runs take {:.0f} s; the service's limit is {} s per job",
                            r.rounds, run_s + to_s(r.cooldown), total_s, config.limits.max_total_sweep_s));
  }
  return std::nullopt;
}

// target.tls.ca_file must be a file inside the configured CA directory (symbolic links and
// ".." resolved first), so a caller cannot probe which files exist elsewhere on the server.
// Whether the file exists is not said here: a missing one fails the job's first connection.
std::optional<ApiError> check_ca_file(const ServiceConfig& config, const llm::Target& target,
                                      const std::string& field) {
  if (target.ca_file.empty()) return std::nullopt;
  if (config.tls_ca_dir.empty()) {
    return api_error(errc::forbidden, "this service takes no CA files from specs (tls_ca_dir is not configured)",
                     field);
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::weakly_canonical(config.tls_ca_dir, ec);
  const fs::path file = fs::weakly_canonical(target.ca_file, ec);
  if (ec || !fs::path(target.ca_file).is_absolute() || file.parent_path() != dir) {
    return api_error(errc::forbidden, fmt::format("must be an absolute path of a file in {}", config.tls_ca_dir),
                     field);
  }
  return std::nullopt;
}

}  // namespace

// A scenario's profile against the service's limits: its length, its peak rate, its requests.
std::optional<ApiError> check_scenario_limits(const ServiceConfig& config, const sweep::JobSpec& spec) {
  const Limits& l = config.limits;
  const sweep::ScenarioSettings& sc = *spec.scenario;
  if (sc.max_concurrency > l.max_connections_per_sweep) {
    return over("/scenario/max_concurrency",
                fmt::format("exceeds the service's limit of {} connections", l.max_connections_per_sweep));
  }
  auto profile = sweep::scenario_profile(sc);
  if (!profile) return std::nullopt;  // from_sweep not resolved yet: checked again once it is
  if (to_s(profile->duration()) > l.max_total_sweep_s) {
    return over("/scenario/profile", fmt::format("the profile lasts {:.0f} s; the service's limit is {} s per job",
                                                 to_s(profile->duration()), l.max_total_sweep_s));
  }
  double peak = 0;
  for (const auto& seg : profile->segments())
    peak = std::max({peak, seg.rate_rps + seg.amplitude_rps, seg.to_rate_rps + seg.amplitude_rps});
  if (peak > l.max_rate_rps) {
    return over("/scenario/profile",
                fmt::format("the profile reaches {:.1f} req/s; the service's limit is {} req/s", peak, l.max_rate_rps));
  }
  if (profile->expected_total() > static_cast<double>(l.max_requests_per_step)) {
    return over("/scenario/profile",
                fmt::format("the profile sends about {:.0f} requests; the service's limit is {} per step",
                            profile->expected_total(), l.max_requests_per_step));
  }
  return std::nullopt;
}

std::optional<ApiError> check_limits(const ServiceConfig& config, const sweep::JobSpec& spec, json& doc) {
  const Limits& l = config.limits;
  const auto& dataset = spec.workload.dataset;
  if (!dataset) {
    if (auto e = bound_lengths(spec.workload.prompt_tokens, doc["workload"], "prompt_tokens", l.max_prompt_tokens,
                               "/workload/prompt_tokens"))
      return e;
  }
  // With a dataset, a distribution of output lengths sits in workload.dataset.output_tokens.
  const bool in_dataset = dataset && !dataset->output_from_dataset && doc["workload"].contains("dataset") &&
                          doc["workload"]["dataset"].value("output_tokens", json()).is_object();
  json& holder = in_dataset ? doc["workload"]["dataset"] : doc["workload"];
  if (auto e = bound_lengths(spec.workload.output_tokens, holder, "output_tokens", l.max_output_tokens,
                             in_dataset ? "/workload/dataset/output_tokens" : "/workload/output_tokens"))
    return e;
  switch (spec.kind) {
    case sweep::JobKind::sweep:
      if (auto e = check_sweep_limits(l, spec.sweep, doc)) return e;
      return check_decided_limits(l, spec);
    case sweep::JobKind::check:
      return check_check_limits(l, spec.check);
    case sweep::JobKind::regression:
      return check_regression_limits(config, spec);
    case sweep::JobKind::scenario:
      return check_scenario_limits(config, spec);
  }
  return std::nullopt;
}

// The CA file of every target the job sends to.
std::optional<ApiError> check_ca_files(const ServiceConfig& config, const sweep::JobSpec& spec) {
  if (auto e = check_ca_file(config, spec.target, sweep::target_field(spec) + "/tls/ca_file")) return e;
  if (spec.candidate) {
    if (auto e = check_ca_file(config, spec.candidate->target, "/candidate/target/tls/ca_file")) return e;
  }
  if (spec.judge) return check_ca_file(config, spec.judge->target, "/judge/target/tls/ca_file");
  return std::nullopt;
}

// The allow-list on every host the job will contact.
std::optional<ApiError> check_allow_list(const ServiceConfig& config, const sweep::JobSpec& spec) {
  if (!config.allow.allows(spec.target.host)) {
    return api_error(errc::forbidden,
                     fmt::format("target host '{}' is not in the service's allow_targets", spec.target.host),
                     sweep::target_field(spec) + "/base_url");
  }
  for (const auto& [field, url] : sweep::side_urls(spec)) {
    auto m = llm::parse_base_url({}, url, field);
    if (!m || !config.allow.allows(m->host)) {
      return api_error(errc::forbidden, fmt::format("the host of {} is not in the service's allow_targets", field),
                       field);
    }
  }
  return std::nullopt;
}

}  // namespace capsweep::api

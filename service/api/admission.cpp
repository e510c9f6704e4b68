// What a job may ask of this service: its lengths, steps, rates and requests within the
// service's limits, its CA files within tls_ca_dir, every host it contacts in allow_targets.
#include "api/admission.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "llm/session_shapes.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"
#include "sweep/kinds.hpp"

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

// A session's turn carries every turn before it: the user's turns and the answers (each at
// most the output bound) are all in its prompt. The largest prompt a session of synthesised
// turns can reach is held to the prompt limit, as one request's is.
std::optional<ApiError> bound_sessions(const Limits& l, const llm::WorkloadSpec& w) {
  if (!w.sessions || w.dataset) return std::nullopt;
  const double turns = llm::most_session_turns(*w.sessions);
  const double prompt = std::min(w.prompt_tokens.upper_bound(), l.max_prompt_tokens);
  const double output = std::min(w.output_tokens.upper_bound(), l.max_output_tokens);
  const double largest = turns * prompt + (turns - 1) * output;
  if (largest <= l.max_prompt_tokens) return std::nullopt;
  return over("/workload/sessions/turns",
              fmt::format("a session of {:.0f} turns of up to {:.0f} prompt and {:.0f} answer tokens reaches a prompt "
                          "of {:.0f} tokens (its history included); the service's limit is {}",
                          turns, prompt, output, largest, l.max_prompt_tokens));
}

}  // namespace

std::optional<ApiError> check_scenario_limits(const ServiceConfig& config, const sweep::JobSpec& spec) {
  if (auto e = sweep::scenario_limits(config.limits, spec)) return from_error(*e);
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
  if (auto e = bound_sessions(l, spec.workload)) return e;
  // The job's kind's own limits (sweep/kinds).
  if (auto e = sweep::rules(spec.kind).admit(l, spec, doc)) return from_error(*e);
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
  const auto refused = sweep::refused_host(spec, [&](std::string_view h) { return config.allow.allows(h); });
  if (!refused) return std::nullopt;
  return api_error(errc::forbidden,
                   refused->target
                       ? fmt::format("target host '{}' is not in the service's allow_targets", refused->what)
                       : fmt::format("the host of {} is not in the service's allow_targets", refused->field),
                   refused->field);
}

}  // namespace capsweep::api

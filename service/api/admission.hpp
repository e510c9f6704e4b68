#pragma once
// Admission of a parsed job spec against the service's own settings (api/admission.cpp).

#include <nlohmann/json.hpp>
#include <optional>

#include "api/config.hpp"
#include "api/errors.hpp"
#include "sweep/spec.hpp"

namespace capsweep::api {

// The service's limits, on the parsed spec; may fill limits into the stored document
// (a length distribution's max, a sweep's max rate and longest step).
std::optional<ApiError> check_limits(const ServiceConfig& config, const sweep::JobSpec& spec, nlohmann::json& doc);
// A scenario's profile against the service's limits: its length, its peak rate, its requests
// (again once from_sweep has given it a capacity).
std::optional<ApiError> check_scenario_limits(const ServiceConfig& config, const sweep::JobSpec& spec);
// The CA file of every target the job sends to lies in tls_ca_dir.
std::optional<ApiError> check_ca_files(const ServiceConfig& config, const sweep::JobSpec& spec);
// The allow-list on every host the job will contact.
std::optional<ApiError> check_allow_list(const ServiceConfig& config, const sweep::JobSpec& spec);

}  // namespace capsweep::api

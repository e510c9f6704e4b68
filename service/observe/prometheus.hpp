#pragma once
// Prometheus text exposition format 0.0.4, parsed into samples: HELP/TYPE lines, labels with
// escapes, NaN/+Inf/-Inf, optional timestamps, histograms as their _bucket/_sum/_count samples.
// "_created" samples (OpenMetrics' creation times) are dropped. Pure: no I/O.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace capsweep::observe {

struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in exposition order
  double value = 0;
  std::optional<std::int64_t> timestamp_ms;

  // The value of label `key`, if present.
  std::optional<std::string_view> label(std::string_view key) const;
};

struct Exposition {
  std::vector<Sample> samples;
  std::map<std::string, std::string, std::less<>> types;  // family -> counter|gauge|histogram|...
  std::map<std::string, std::string, std::less<>> help;

  // Sum over the samples named `name` whose labels include every (key, value) of `match`;
  // nullopt when no sample matches.
  std::optional<double> sum(std::string_view name,
                            const std::vector<std::pair<std::string, std::string>>& match = {}) const;
};

// Parses a whole scrape. Errors (errc::parse_error) name the 1-based line and what is wrong.
Result<Exposition> parse_prometheus_text(std::string_view text);

}  // namespace capsweep::observe

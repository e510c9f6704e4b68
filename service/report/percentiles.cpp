#include "report/percentiles.hpp"

#include <fmt/format.h>

#include "core/json_access.hpp"
#include "core/metrics.hpp"

namespace capsweep::report {

std::vector<double> report_percentiles(const nlohmann::json& spec) {
  const nlohmann::json& given = json_at(json_at(spec, "report"), "percentiles");
  std::vector<double> out;
  if (given.is_array()) {
    for (const auto& q : given) {
      if (q.is_number() && q.get<double>() > 0 && q.get<double>() < 100) out.push_back(q.get<double>());
    }
  }
  if (out.empty()) out = kDefaultPercentiles;
  return out;
}

std::vector<std::string> latency_keys(const std::string& metric, const std::vector<double>& percentiles) {
  std::vector<std::string> out{fmt::format("mean_{}_ms", metric)};
  for (double q : percentiles) out.push_back(fmt::format("{}_{}_ms", percentile_key(q), metric));
  return out;
}

}  // namespace capsweep::report

#pragma once
// A Prometheus server as the source of a target's gauges: one instant query each (PromQL,
// e.g. `sum(vllm:num_requests_waiting{model_name="llm-8b"})` over every replica), sent to the
// server's HTTP API (GET /api/v1/query). One metrics_url sees one replica; a Prometheus
// server sees the fleet. Parsing and the request path are pure; the scraper does the I/O.

#include <array>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace capsweep::observe {

// target.prometheus: {"url": "http://127.0.0.1:9090", "queries": {"running", "waiting",
// "kv_cache", "prompt_tokens", "generation_tokens"}} (at least one query).
struct PromSource {
  std::string url;
  std::map<std::string, std::string> queries;  // gauge name -> PromQL
};
// The gauge names a source may query (the ServerGauges it feeds).
inline constexpr std::array<std::string_view, 5> kPromGauges{"running", "waiting", "kv_cache", "prompt_tokens",
                                                             "generation_tokens"};

// Parses the block; errors name the field below `field` ("/target/prometheus/queries/queue").
Result<PromSource> parse_prom_source(const nlohmann::json& j, const std::string& field = "/target/prometheus");

// "/api/v1/query?query=<percent-encoded PromQL>" below a base path ("" or "/prom").
std::string instant_query_path(std::string_view base_path, std::string_view promql);

// The value of an instant query's answer: a scalar, or the sum of a vector's samples;
// nullopt for an empty vector (nothing matched). An answer with "status": "error" is an
// error carrying the server's errorType and message (Prometheus' own words); anything that is
// not a Prometheus API answer is an error naming only its class.
Result<std::optional<double>> parse_instant_query(std::string_view body);

}  // namespace capsweep::observe

#include "observe/server_gauges.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/text.hpp"

namespace capsweep::observe {

void ServerGauges::add(Nanos at, const Exposition& e, bool counters_only) {
  Point p{to_s(at),
          e.sum("vllm:num_requests_running"),
          e.sum("vllm:num_requests_waiting"),
          e.sum("vllm:kv_cache_usage_perc"),
          e.sum("vllm:prompt_tokens_total"),
          e.sum("vllm:generation_tokens_total"),
          e.sum("vllm:prefix_cache_queries_total"),
          e.sum("vllm:prefix_cache_hits_total"),
          e.sum("vllm:gpu_prefix_cache_hit_rate")};                  // older vLLM
  if (!p.kv_usage) p.kv_usage = e.sum("vllm:gpu_cache_usage_perc");  // older vLLM
  if (counters_only) p.running = p.waiting = p.kv_usage = p.prefix_hit_rate = std::nullopt;
  points_.push_back(p);
}

void ServerGauges::add_point(const Point& p) {
  points_.push_back(p);
}

void ServerGauges::add_failure(std::string error) {
  ++failures_;
  last_error_ = printable_ascii(error);
}

std::optional<double> ServerGauges::waiting_slope_per_s() const {
  double n = 0, st = 0, sy = 0, stt = 0, sty = 0;
  for (const auto& p : points_) {
    if (!p.waiting) continue;
    n += 1;
    st += p.t_s;
    sy += *p.waiting;
    stt += p.t_s * p.t_s;
    sty += p.t_s * *p.waiting;
  }
  const double denom = n * stt - st * st;
  if (n < 3 || denom <= 0) return std::nullopt;
  return (n * sty - st * sy) / denom;
}

nlohmann::json ServerGauges::summary() const {
  nlohmann::json j;
  j["scrapes"] = points_.size();
  j["scrape_failures"] = failures_;
  j["last_scrape_error"] = last_error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(last_error_);
  auto gauge = [&](const char* mean_key, const char* max_key, auto member) {
    double sum = 0, max = 0;
    std::size_t n = 0;
    for (const auto& p : points_) {
      if (const auto& v = p.*member) {
        sum += *v;
        max = n ? std::max(max, *v) : *v;
        ++n;
      }
    }
    j[mean_key] = n ? nlohmann::json(sum / static_cast<double>(n)) : nlohmann::json(nullptr);
    j[max_key] = n ? nlohmann::json(max) : nlohmann::json(nullptr);
  };
  gauge("mean_running", "max_running", &Point::running);
  gauge("mean_waiting", "max_waiting", &Point::waiting);
  gauge("mean_kv_cache_usage", "max_kv_cache_usage", &Point::kv_usage);
  auto delta = [&](const char* key, auto member) {
    std::optional<double> first, last;
    for (const auto& p : points_) {
      if (const auto& v = p.*member) {
        if (!first) first = v;
        last = v;
      }
    }
    j[key] = first ? nlohmann::json(*last - *first) : nlohmann::json(nullptr);
  };
  delta("prompt_tokens_delta", &Point::prompt_tokens);
  delta("generation_tokens_delta", &Point::generation_tokens);
  delta("prefix_cache_queries_delta", &Point::prefix_queries);
  delta("prefix_cache_hits_delta", &Point::prefix_hits);
  const auto& queried = j["prefix_cache_queries_delta"];
  // The step's own hit rate only from the counters' deltas over the step. The older gauge
  // (vllm:gpu_prefix_cache_hit_rate) is a rate since the server started: it cannot give a
  // step's, and is reported apart as what it is, its last value.
  if (queried.is_number() && queried.get<double>() > 0 && j["prefix_cache_hits_delta"].is_number()) {
    j["prefix_cache_hit_rate"] = j["prefix_cache_hits_delta"].get<double>() / queried.get<double>();
    j["prefix_cache_hit_rate_source"] = "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total";
  } else {
    j["prefix_cache_hit_rate"] = nullptr;
    j["prefix_cache_hit_rate_source"] = nullptr;
  }
  std::optional<double> lifetime;
  for (const auto& p : points_) {
    if (p.prefix_hit_rate) lifetime = p.prefix_hit_rate;
  }
  j["prefix_cache_lifetime_hit_rate"] = lifetime ? nlohmann::json(*lifetime) : nlohmann::json(nullptr);
  const auto slope = waiting_slope_per_s();
  j["waiting_slope_per_s"] = slope ? nlohmann::json(*slope) : nlohmann::json(nullptr);
  return j;
}

}  // namespace capsweep::observe

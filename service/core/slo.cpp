#include "core/slo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/fields.hpp"

namespace capsweep {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr LatencyMetric kMetrics[] = {LatencyMetric::ttft, LatencyMetric::tpot,      LatencyMetric::itl,
                                      LatencyMetric::e2el, LatencyMetric::ttft_sent, LatencyMetric::e2el_sent,
                                      LatencyMetric::ttfo};

const SampleSet& samples_of(const StepMetrics& m, LatencyMetric metric) {
  switch (metric) {
    case LatencyMetric::ttft:
      return m.ttft_ms;
    case LatencyMetric::tpot:
      return m.tpot_ms;
    case LatencyMetric::itl:
      return m.itl_ms;
    case LatencyMetric::e2el:
      return m.e2el_ms;
    case LatencyMetric::ttft_sent:
      return m.ttft_sent_ms;
    case LatencyMetric::e2el_sent:
      return m.e2el_sent_ms;
    case LatencyMetric::ttfo:
      return m.ttfo_ms;
  }
  return m.ttft_ms;
}

// Incomplete requests known to exceed `bound_ms` for this metric.
std::uint64_t censored_above(const StepMetrics& m, LatencyMetric metric, double bound_ms) {
  const std::vector<double>* elapsed = nullptr;
  if (metric == LatencyMetric::ttft) elapsed = &m.incomplete_without_first_token_ms;
  if (metric == LatencyMetric::e2el) elapsed = &m.incomplete_elapsed_ms;
  if (metric == LatencyMetric::ttfo) elapsed = &m.incomplete_without_first_output_ms;
  if (!elapsed) return 0;
  return static_cast<std::uint64_t>(
      std::count_if(elapsed->begin(), elapsed->end(), [&](double e) { return e > bound_ms; }));
}

// Inverse of the standard normal upper tail, by bisection (z with P(Z > z) = tail).
double normal_upper_quantile(double tail) {
  double lo = 0, hi = 40;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > tail ? lo : hi) = mid;
  }
  return hi;
}

Result<double> parse_percentile_key(std::string_view key, const std::string& field) {
  if (key == "median") return 50.0;
  double q = 0;
  if (key.size() >= 2 && key.front() == 'p') {
    auto [ptr, ec] = std::from_chars(key.data() + 1, key.data() + key.size(), q);
    if (ec == std::errc() && ptr == key.data() + key.size() && q > 0 && q < 100) return q;
  }
  return invalid(field, fmt::format("'{}' is not a percentile: use mean, median or pNN with "
                                    "0 < NN < 100 (p95, p99.9)",
                                    key));
}

nlohmann::json finite_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}

}  // namespace

std::string_view to_string(Verdict v) noexcept {
  switch (v) {
    case Verdict::pass:
      return "pass";
    case Verdict::fail:
      return "fail";
    case Verdict::inconclusive:
      return "inconclusive";
  }
  return "unknown";
}

std::string_view to_string(LatencyMetric m) noexcept {
  switch (m) {
    case LatencyMetric::ttft:
      return "ttft_ms";
    case LatencyMetric::tpot:
      return "tpot_ms";
    case LatencyMetric::itl:
      return "itl_ms";
    case LatencyMetric::e2el:
      return "e2el_ms";
    case LatencyMetric::ttft_sent:
      return "ttft_sent_ms";
    case LatencyMetric::e2el_sent:
      return "e2el_sent_ms";
    case LatencyMetric::ttfo:
      return "ttfo_ms";
  }
  return "unknown";
}

namespace {

// "ttft_ms": {"p95": 800, "mean": 300}: the bounds of one latency metric.
Result<std::vector<LatencyBound>> parse_latency_bounds(LatencyMetric metric, const nlohmann::json& value,
                                                       const std::string& f) {
  if (!value.is_object() || value.empty()) return invalid(f, "must be an object of bounds such as {\"p95\": 800}");
  std::vector<LatencyBound> out;
  for (const auto& [stat, bound] : value.items()) {
    auto b = fields::number(value, stat.c_str(), f, std::nullopt, fields::Sign::positive);
    if (!b) return b.error();
    LatencyBound lb{metric, std::nullopt, *b};
    if (stat != "mean") {
      auto q = parse_percentile_key(stat, f + "/" + stat);
      if (!q) return q.error();
      lb.percentile = *q;
    }
    out.push_back(lb);
  }
  return out;
}

// "goodput": {"ttft_ms": 800, "tpot_ms": 50}: the per-request bounds of a good request.
Result<GoodputBounds> parse_goodput_bounds(const nlohmann::json& value, const std::string& f) {
  if (!value.is_object()) return invalid(f, "must be an object such as {\"ttft_ms\": 800}");
  GoodputBounds g;
  for (const auto& [gk, gv] : value.items()) {
    const std::string gf = f + "/" + gk;
    auto b = fields::number(value, gk.c_str(), f, std::nullopt, fields::Sign::positive);
    if (!b) return b.error();
    auto d = duration_from_ms(*b, gf);
    if (!d) return d.error();
    if (gk == "ttft_ms")
      g.ttft = *d;
    else if (gk == "tpot_ms")
      g.tpot = *d;
    else if (gk == "e2el_ms")
      g.e2el = *d;
    else if (gk == "ttft_sent_ms")
      g.ttft_sent = *d;
    else if (gk == "e2el_sent_ms")
      g.e2el_sent = *d;
    else
      return invalid(gf, "unknown goodput bound (expected ttft_ms, tpot_ms, e2el_ms, ttft_sent_ms or e2el_sent_ms)");
  }
  return g;
}

}  // namespace

Result<SloSpec> parse_slo(const nlohmann::json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "must be an object");
  SloSpec slo;
  for (const auto& [key, value] : j.items()) {
    const std::string f = field + "/" + key;
    const std::string& name = key;  // clang 14 (the fuzz build) cannot capture a structured binding
    auto metric = std::find_if(std::begin(kMetrics), std::end(kMetrics),
                               [&name](LatencyMetric m) { return to_string(m) == name; });
    if (metric != std::end(kMetrics)) {
      auto bounds = parse_latency_bounds(*metric, value, f);
      if (!bounds) return bounds.error();
      slo.latency.insert(slo.latency.end(), bounds->begin(), bounds->end());
    } else if (key == "max_error_rate") {
      auto e = fields::number_in(j, "max_error_rate", field, std::nullopt, 0, 1);
      if (!e) return e.error();
      slo.max_error_rate = *e;
    } else if (key == "min_goodput_rps") {
      auto g = fields::number(j, "min_goodput_rps", field, std::nullopt, fields::Sign::non_negative);
      if (!g) return g.error();
      slo.min_goodput_rps = *g;
    } else if (key == "confidence") {
      auto c = fields::number(j, "confidence", field, std::nullopt);
      if (!c || !(*c >= 0.5 && *c < 1)) return invalid(f, "must be a number in [0.5, 1)");
      slo.confidence = *c;
    } else if (key == "goodput") {
      auto g = parse_goodput_bounds(value, f);
      if (!g) return g.error();
      slo.goodput = *g;
    } else {
      return invalid(f,
                     "unknown SLO field (expected ttft_ms, tpot_ms, itl_ms, e2el_ms, "
                     "ttft_sent_ms, e2el_sent_ms, ttfo_ms, max_error_rate, min_goodput_rps, goodput "
                     "or confidence)");
    }
  }
  return slo;
}

double CriterionResult::severity() const noexcept {
  if (upper_bound) return bound > 0 ? measured / bound : kInf;
  return measured > 0 ? bound / measured : kInf;
}

const CriterionResult* SloEvaluation::limiting() const noexcept {
  const CriterionResult* best = nullptr;
  auto rank = [](Verdict v) { return v == Verdict::fail ? 2 : v == Verdict::inconclusive ? 1 : 0; };
  for (const auto& c : criteria) {
    if (!best || rank(c.verdict) > rank(best->verdict) ||
        (rank(c.verdict) == rank(best->verdict) && c.severity() > best->severity())) {
      best = &c;
    }
  }
  return best;
}

nlohmann::json SloEvaluation::to_json() const {
  nlohmann::json j;
  j["verdict"] = to_string(verdict);
  j["generator_limited"] = generator_limited;
  auto& list = j["criteria"] = nlohmann::json::array();
  for (const auto& c : criteria) {
    list.push_back({{"name", c.name},
                    {"bound", c.bound},
                    {"comparison", c.upper_bound ? "<=" : ">="},
                    {"measured", finite_or_null(c.measured)},
                    {"ci_lower", finite_or_null(c.ci_lower)},
                    {"ci_upper", finite_or_null(c.ci_upper)},
                    {"samples", c.samples},
                    {"verdict", to_string(c.verdict)}});
  }
  const auto* lim = limiting();
  j["limiting_metric"] = lim ? nlohmann::json(lim->name) : nlohmann::json(nullptr);
  return j;
}

namespace {

// A latency bound judged on its interval: a percentile's distribution-free one, a mean's
// normal one; incomplete requests already past the bound count above it.
CriterionResult latency_criterion(const LatencyBound& lb, const StepMetrics& m, double confidence) {
  const SampleSet& s = samples_of(m, lb.metric);
  CriterionResult c;
  c.bound = lb.bound_ms;
  const std::string metric_name(to_string(lb.metric));
  const std::uint64_t extra = censored_above(m, lb.metric, lb.bound_ms);
  c.samples = s.count() + extra;
  if (lb.percentile) {
    c.name = fmt::format("{}_{}", percentile_key(*lb.percentile), metric_name);
    c.measured = s.percentile(*lb.percentile, extra);
    const auto ci = s.percentile_interval(*lb.percentile, confidence, extra);
    c.ci_lower = ci.lower;
    c.ci_upper = ci.upper;
  } else {
    c.name = "mean_" + metric_name;
    c.measured = extra ? kInf : s.mean();
    const double half =
        s.count() > 1 ? normal_upper_quantile((1 - confidence) / 2) * s.stddev() / std::sqrt(double(s.count() - 1))
                      : kInf;
    c.ci_lower = extra ? c.measured : c.measured - half;
    c.ci_upper = extra ? c.measured : c.measured + half;
  }
  if (c.samples == 0)
    c.verdict = Verdict::inconclusive;
  else if (c.ci_upper <= c.bound)
    c.verdict = Verdict::pass;
  else if (c.ci_lower > c.bound)
    c.verdict = Verdict::fail;
  else
    c.verdict = Verdict::inconclusive;
  return c;
}

}  // namespace

SloEvaluation evaluate_slo(const SloSpec& slo, const StepMetrics& m, bool generator_limited) {
  SloEvaluation ev;
  ev.generator_limited = generator_limited;
  for (const auto& lb : slo.latency) ev.criteria.push_back(latency_criterion(lb, m, slo.confidence));
  if (slo.max_error_rate) {
    CriterionResult c;
    c.name = "error_rate";
    c.bound = *slo.max_error_rate;
    c.measured = c.ci_lower = c.ci_upper = m.error_rate();
    c.samples = m.measured;
    c.verdict = m.measured == 0 ? Verdict::inconclusive : c.measured <= c.bound ? Verdict::pass : Verdict::fail;
    ev.criteria.push_back(std::move(c));
  }
  if (slo.min_goodput_rps) {
    CriterionResult c;
    c.name = "request_goodput";
    c.upper_bound = false;
    c.bound = *slo.min_goodput_rps;
    c.measured = c.ci_lower = c.ci_upper = m.request_goodput();
    c.samples = m.measured;
    c.verdict = m.measured == 0 ? Verdict::inconclusive : c.measured >= c.bound ? Verdict::pass : Verdict::fail;
    ev.criteria.push_back(std::move(c));
  }
  bool any_fail = false, any_inconclusive = false;
  for (const auto& c : ev.criteria) {
    any_fail |= c.verdict == Verdict::fail;
    any_inconclusive |= c.verdict == Verdict::inconclusive;
  }
  ev.verdict = any_fail                                  ? Verdict::fail
               : (any_inconclusive || generator_limited) ? Verdict::inconclusive
                                                         : Verdict::pass;
  return ev;
}

namespace {

// Exceedances a step of n samples may hold and still pass the q-th percentile bound.
std::int64_t allowed_exceedances(std::uint64_t n, double q, double confidence) {
  const auto r = percentile_rank_interval(n, q, confidence);
  return static_cast<std::int64_t>(n) - 1 - r.upper;  // ranks above the upper bound's rank
}

// Smallest n in [1, cap] with pred(n) true; pred is monotone in n (false then true). cap when none.
template <class Pred>
std::uint64_t smallest(std::uint64_t cap, Pred pred) {
  std::uint64_t hi = 1;
  while (hi < cap && !pred(hi)) hi = std::min(cap, hi * 2);
  if (!pred(hi)) return cap;
  std::uint64_t lo = hi / 2;  // pred(lo) false (or lo == 0)
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (pred(mid) ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

SampleNeed samples_needed(const SloSpec& slo) {
  constexpr std::uint64_t kCap = 10'000'000;
  SampleNeed need;
  for (const auto& lb : slo.latency) {
    if (!lb.percentile) continue;
    const double q = *lb.percentile;
    const double conf = slo.confidence;
    const std::uint64_t decidable =
        smallest(kCap, [&](std::uint64_t n) { return allowed_exceedances(n, q, conf) >= 0; });
    const double half_rate = (1 - q / 100) / 2;
    const std::uint64_t sized = smallest(kCap, [&](std::uint64_t n) {
      return static_cast<double>(allowed_exceedances(n, q, conf)) >= half_rate * static_cast<double>(n);
    });
    if (sized > need.sized) {
      need.sized = sized;
      need.percentile_name = fmt::format("{}_{}", percentile_key(q), to_string(lb.metric));
    }
    need.decidable = std::max(need.decidable, decidable);
  }
  return need;
}

std::string describe_slo(const nlohmann::json& slo) {
  if (!slo.is_object()) return "no SLO";
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  // First token, then per token, then whole request; "e2el_sent_ms" reads "E2EL (sent)".
  for (const char* key : {"ttft_ms", "ttft_sent_ms", "ttfo_ms", "tpot_ms", "itl_ms", "e2el_ms", "e2el_sent_ms"}) {
    auto bound = slo.find(key);
    if (bound == slo.end() || !bound->is_object()) continue;
    std::string name(key, std::string_view(key).find('_'));
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (std::string_view(key).find("_sent") != std::string_view::npos) name += " (sent)";
    for (const auto& [stat, value] : bound->items()) {
      if (value.is_number()) add(fmt::format("{} {} \u2264 {:g} ms", name, stat, value.get<double>()));
    }
  }
  if (auto e = slo.find("max_error_rate"); e != slo.end() && e->is_number()) {
    add(fmt::format("errors \u2264 {:g}%", 100 * e->get<double>()));
  }
  if (auto g = slo.find("min_goodput_rps"); g != slo.end() && g->is_number()) {
    add(fmt::format("goodput \u2265 {:g} req/s", g->get<double>()));
  }
  return out.empty() ? "no SLO" : out;
}

}  // namespace capsweep

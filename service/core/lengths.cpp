#include "core/lengths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/fields.hpp"
#include "core/stats.hpp"
#include "core/text.hpp"

namespace capsweep {
namespace {

// Standard normal quantile at 0.95.
constexpr double kZ95 = 1.6448536269514722;

std::uint32_t clamp_round(double x, std::uint32_t lo, std::uint32_t hi) {
  if (!(x >= lo)) return lo;  // also catches NaN
  if (x >= hi) return hi;
  return static_cast<std::uint32_t>(std::llround(x));
}

}  // namespace

std::string_view to_string(LengthKind k) noexcept {
  switch (k) {
    case LengthKind::fixed:
      return "fixed";
    case LengthKind::uniform:
      return "uniform";
    case LengthKind::normal:
      return "normal";
    case LengthKind::lognormal:
      return "lognormal";
    case LengthKind::empirical:
      return "empirical";
  }
  return "unknown";
}

LengthDist LengthDist::fixed(std::uint32_t value) {
  LengthDist d;
  d.kind_ = LengthKind::fixed;
  d.a_ = std::max<std::uint32_t>(value, 1);
  return d;
}

Result<LengthDist> LengthDist::uniform(std::uint32_t min, std::uint32_t max) {
  if (min < 1) return invalid("/min", "min must be at least 1");
  if (max < min) return invalid("/max", fmt::format("max ({}) must be >= min ({})", max, min));
  LengthDist d;
  d.kind_ = LengthKind::uniform;
  d.min_ = min;
  d.max_ = max;
  return d;
}

Result<LengthDist> LengthDist::normal(double mean, double stdev, std::uint32_t min, std::uint32_t max) {
  if (!std::isfinite(mean) || mean < 1) return invalid("/mean", "mean must be a number >= 1");
  if (!std::isfinite(stdev) || stdev < 0) return invalid("/stdev", "stdev must be >= 0");
  if (max < min) return invalid("/max", fmt::format("max ({}) must be >= min ({})", max, min));
  LengthDist d;
  d.kind_ = LengthKind::normal;
  d.a_ = mean;
  d.b_ = stdev;
  d.min_ = std::max<std::uint32_t>(min, 1);
  d.max_ = std::max(max, d.min_);
  return d;
}

Result<LengthDist> LengthDist::lognormal(double median, double p95, std::uint32_t min, std::uint32_t max) {
  if (!std::isfinite(median) || median < 1) return invalid("/median", "median must be >= 1");
  if (!std::isfinite(p95) || p95 <= median) {
    return invalid("/p95", fmt::format("p95 ({}) must be greater than the median ({})", p95, median));
  }
  if (max < min) return invalid("/max", fmt::format("max ({}) must be >= min ({})", max, min));
  LengthDist d;
  d.kind_ = LengthKind::lognormal;
  d.a_ = std::log(median);
  d.b_ = (std::log(p95) - d.a_) / kZ95;
  d.median_ = median;
  d.p95_ = p95;
  d.min_ = std::max<std::uint32_t>(min, 1);
  d.max_ = std::max(max, d.min_);
  return d;
}

Result<LengthDist> LengthDist::empirical(std::vector<std::uint32_t> values, std::vector<double> weights) {
  if (values.empty()) return invalid("/values", "needs at least one value");
  if (!weights.empty() && weights.size() != values.size()) {
    return invalid("/weights", "needs one weight per value");
  }
  LengthDist d;
  d.kind_ = LengthKind::empirical;
  double total = 0;
  d.cumulative_.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 1) return invalid(fmt::format("/values/{}", i), "lengths must be >= 1");
    const double w = weights.empty() ? 1.0 : weights[i];
    if (!std::isfinite(w) || w < 0) {
      return invalid(fmt::format("/weights/{}", i), "weights must be finite and >= 0");
    }
    total += w;
    d.cumulative_.push_back(total);
  }
  if (!(total > 0)) return invalid("/weights", "weights must not all be zero");
  d.values_ = std::move(values);
  d.weights_ = std::move(weights);
  return d;
}

nlohmann::json LengthDist::to_json() const {
  nlohmann::json j = {{"dist", std::string(to_string(kind_))}};
  switch (kind_) {
    case LengthKind::fixed:
      j["value"] = static_cast<std::uint32_t>(a_);
      return j;
    case LengthKind::uniform:
      j["min"] = min_;
      j["max"] = max_;
      return j;
    case LengthKind::normal:
      j["mean"] = a_;
      j["stdev"] = b_;
      break;
    case LengthKind::lognormal:
      j["median"] = median_;
      j["p95"] = p95_;
      break;
    case LengthKind::empirical:
      j["values"] = values_;
      if (!weights_.empty()) j["weights"] = weights_;
      return j;
  }
  j["min"] = min_;
  if (max_ != UINT32_MAX) j["max"] = max_;
  return j;
}

std::uint32_t LengthDist::sample(Rng& rng) const {
  switch (kind_) {
    case LengthKind::fixed:
      return static_cast<std::uint32_t>(a_);
    case LengthKind::uniform:
      return static_cast<std::uint32_t>(rng.uniform_int(min_, max_));
    case LengthKind::normal:
      return clamp_round(a_ + b_ * rng.normal(), min_, max_);
    case LengthKind::lognormal:
      return clamp_round(std::exp(a_ + b_ * rng.normal()), min_, max_);
    case LengthKind::empirical: {
      const double x = rng.uniform01() * cumulative_.back();
      auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), x);
      if (it == cumulative_.end()) --it;
      return values_[static_cast<std::size_t>(it - cumulative_.begin())];
    }
  }
  return 1;
}

std::uint32_t LengthDist::upper_bound() const noexcept {
  switch (kind_) {
    case LengthKind::fixed:
      return static_cast<std::uint32_t>(a_);
    case LengthKind::empirical:
      return *std::max_element(values_.begin(), values_.end());
    default:
      return max_;
  }
}

double LengthDist::nominal_mean() const noexcept {
  switch (kind_) {
    case LengthKind::fixed:
      return a_;
    case LengthKind::uniform:
      return (static_cast<double>(min_) + max_) / 2;
    case LengthKind::normal:
      return a_;
    case LengthKind::lognormal:
      return std::exp(a_ + b_ * b_ / 2);
    case LengthKind::empirical: {
      double sum = 0, prev = 0;
      for (std::size_t i = 0; i < values_.size(); ++i) {
        sum += values_[i] * (cumulative_[i] - prev);
        prev = cumulative_[i];
      }
      return sum / cumulative_.back();
    }
  }
  return 1;
}

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

template <class T>
bool parse_number(std::string_view s, T& out) {
  s = trim(s);
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

}  // namespace

Result<LengthDist> parse_length_histogram_csv(std::string_view csv, const std::string& field) {
  std::vector<std::uint32_t> values;
  std::vector<double> weights;
  std::optional<Error> failure;
  for_each_line(csv, [&](std::string_view raw, std::size_t line_no) {
    const std::string_view line = trim(raw);
    if (line.empty() || line.front() == '#') return true;
    const auto comma = line.find(',');
    if (comma == std::string_view::npos) {
      failure =
          Error{errc::parse_error, fmt::format("CSV line {}: expected 'value,weight', got '{}'", line_no, line), field};
      return false;
    }
    std::uint32_t value = 0;
    double weight = 0;
    const bool ok_value = parse_number(line.substr(0, comma), value);
    const bool ok_weight = parse_number(line.substr(comma + 1), weight);
    if (!ok_value || !ok_weight) {
      if (values.empty() && line_no == 1 && !ok_value) return true;  // a header line
      failure = Error{errc::parse_error,
                      fmt::format("CSV line {}: '{}' is not 'value,weight' with an integer value "
                                  "and a number weight",
                                  line_no, line),
                      field};
      return false;
    }
    if (value < 1 || !std::isfinite(weight) || weight < 0) {
      failure =
          Error{errc::parse_error, fmt::format("CSV line {}: value must be >= 1 and weight >= 0", line_no), field};
      return false;
    }
    values.push_back(value);
    weights.push_back(weight);
    return true;
  });
  if (failure) return *failure;
  if (values.empty()) return Error{errc::parse_error, "CSV histogram has no rows", field};
  auto d = LengthDist::empirical(std::move(values), std::move(weights));
  if (!d) return Error{errc::parse_error, d.error().message, field};
  return d;
}

namespace {

Result<double> get_number(const nlohmann::json& j, const char* key, const std::string& field) {
  return fields::number(j, key, field, std::nullopt);
}

Result<std::uint32_t> get_count(const nlohmann::json& j, const char* key, const std::string& field,
                                std::optional<std::uint32_t> fallback = std::nullopt) {
  return fields::integer<std::uint32_t>(j, key, field, fallback, 1, UINT32_MAX);
}

// Re-roots an error from a factory ("/max") under the distribution's field.
Result<LengthDist> rebase(Result<LengthDist> r, const std::string& field) {
  if (r) return r;
  Error e = r.error();
  e.field = field + e.field;
  return e;
}

}  // namespace

namespace {

// {"dist": "empirical", "values": [...], "weights": [...]} or {"dist": "empirical", "csv": "..."}.
Result<LengthDist> parse_empirical(const nlohmann::json& j, const std::string& field) {
  if (auto csv = j.find("csv"); csv != j.end()) {
    if (!csv->is_string()) return invalid(field + "/csv", "must be the CSV text");
    return parse_length_histogram_csv(csv->get<std::string>(), field + "/csv");
  }
  auto values_it = j.find("values");
  if (values_it == j.end() || !values_it->is_array()) {
    return invalid(field + "/values", "is required: an array of token counts (or give csv)");
  }
  std::vector<std::uint32_t> values;
  for (std::size_t i = 0; i < values_it->size(); ++i) {
    const auto& v = (*values_it)[i];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > std::int64_t{UINT32_MAX}) {
      return invalid(fmt::format("{}/values/{}", field, i), "must be an integer >= 1");
    }
    values.push_back(static_cast<std::uint32_t>(v.get<std::int64_t>()));
  }
  std::vector<double> weights;
  if (auto w = j.find("weights"); w != j.end()) {
    if (!w->is_array()) return invalid(field + "/weights", "must be an array of numbers");
    for (std::size_t i = 0; i < w->size(); ++i) {
      if (!(*w)[i].is_number()) {
        return invalid(fmt::format("{}/weights/{}", field, i), "must be a number");
      }
      weights.push_back((*w)[i].get<double>());
    }
  }
  return rebase(LengthDist::empirical(std::move(values), std::move(weights)), field);
}

}  // namespace

Result<LengthDist> parse_length_dist(const nlohmann::json& j, const std::string& field) {
  if (j.is_number_integer()) {  // shorthand: a bare number is a fixed length
    auto v = j.get<std::int64_t>();
    if (v < 1 || v > std::int64_t{UINT32_MAX}) return invalid(field, "must be >= 1");
    return LengthDist::fixed(static_cast<std::uint32_t>(v));
  }
  if (!j.is_object()) return invalid(field, "must be an object like {\"dist\": \"fixed\", ...}");
  auto dist_it = j.find("dist");
  if (dist_it == j.end() || !dist_it->is_string()) {
    return invalid(field + "/dist", "is required: fixed, uniform, normal, lognormal or empirical");
  }
  const auto dist = dist_it->get<std::string>();
  // A key the distribution does not read (a typo like "p59", or another distribution's) is
  // refused: ignoring it would send lengths the spec did not ask for.
  const auto known = [&]() -> std::optional<Error> {
    const std::string what = "field of a " + dist + " distribution";
    if (dist == "fixed") return fields::known_keys(j, {"dist", "value"}, field, what);
    if (dist == "uniform") return fields::known_keys(j, {"dist", "min", "max"}, field, what);
    if (dist == "normal") return fields::known_keys(j, {"dist", "mean", "stdev", "min", "max"}, field, what);
    if (dist == "lognormal") return fields::known_keys(j, {"dist", "median", "p95", "min", "max"}, field, what);
    if (dist == "empirical")
      return fields::known_keys(j, {"dist", "values", "weights", "csv", "dataset", "field", "sha256"}, field, what);
    return std::nullopt;
  }();
  if (known) return *known;
  if (dist == "fixed") {
    auto v = get_count(j, "value", field);
    if (!v) return v.error();
    return LengthDist::fixed(*v);
  }
  if (dist == "uniform") {
    auto lo = get_count(j, "min", field);
    if (!lo) return lo.error();
    auto hi = get_count(j, "max", field);
    if (!hi) return hi.error();
    return rebase(LengthDist::uniform(*lo, *hi), field);
  }
  if (dist == "normal" || dist == "lognormal") {
    auto lo = get_count(j, "min", field, 1u);
    if (!lo) return lo.error();
    auto hi = get_count(j, "max", field, UINT32_MAX);
    if (!hi) return hi.error();
    if (dist == "normal") {
      auto mean = get_number(j, "mean", field);
      if (!mean) return mean.error();
      auto stdev = get_number(j, "stdev", field);
      if (!stdev) return stdev.error();
      return rebase(LengthDist::normal(*mean, *stdev, *lo, *hi), field);
    }
    auto median = get_number(j, "median", field);
    if (!median) return median.error();
    auto p95 = get_number(j, "p95", field);
    if (!p95) return p95.error();
    return rebase(LengthDist::lognormal(*median, *p95, *lo, *hi), field);
  }
  if (dist == "empirical") return parse_empirical(j, field);
  return invalid(field + "/dist", fmt::format("unknown distribution '{}' (expected fixed, "
                                              "uniform, normal, lognormal or empirical)",
                                              dist));
}

Result<LengthFit> fit_lengths(std::vector<std::uint32_t> samples, std::size_t bins) {
  if (samples.empty()) return invalid("", "no lengths to fit");
  if (bins < 1) return invalid("/bins", "needs at least one bin");
  std::sort(samples.begin(), samples.end());
  if (samples.front() < 1) return invalid("", "lengths must be >= 1");
  LengthFit f;
  f.count = samples.size();
  f.min = samples.front();
  f.max = samples.back();
  std::vector<double> as_double(samples.begin(), samples.end());
  f.p50 = percentile_sorted(as_double, 50);
  f.p95 = percentile_sorted(as_double, 95);
  // Maximum likelihood on the logarithms: mu their mean, sigma their (population) deviation.
  double sum = 0, sum_sq = 0;
  for (double v : as_double) sum += std::log(v);
  const double mu = sum / static_cast<double>(f.count);
  for (double v : as_double) sum_sq += (std::log(v) - mu) * (std::log(v) - mu);
  const double sigma = std::sqrt(sum_sq / static_cast<double>(f.count));
  f.lognormal_median = std::exp(mu);
  f.lognormal_p95 = std::exp(mu + kZ95 * sigma);
  // Bins of equal width in log space between the smallest and the largest sample.
  const double lo = std::log(static_cast<double>(f.min)), hi = std::log(static_cast<double>(f.max));
  const std::size_t n_bins = f.min == f.max ? 1 : std::min<std::size_t>(bins, f.max - f.min + 1);
  const double width = (hi - lo) / static_cast<double>(n_bins);
  std::size_t next = 0;
  for (std::size_t b = 0; b < n_bins && next < samples.size(); ++b) {
    const double upper = b + 1 == n_bins ? hi : lo + width * static_cast<double>(b + 1);
    const std::size_t first = next;
    while (next < samples.size() && (b + 1 == n_bins || std::log(as_double[next]) < upper)) ++next;
    if (next == first) continue;
    const double centre = std::exp(lo + width * (static_cast<double>(b) + 0.5));
    const double clamped = std::clamp(std::round(centre), as_double[first], as_double[next - 1]);
    f.values.push_back(static_cast<std::uint32_t>(clamped));
    f.weights.push_back(static_cast<double>(next - first));
  }
  return f;
}

nlohmann::json length_fit_blocks(const LengthFit& fit) {
  nlohmann::json fitted;
  if (fit.lognormal_p95 > fit.lognormal_median * (1 + 1e-9) && fit.lognormal_median >= 1) {
    const auto round1 = [](double v) { return std::round(v * 10) / 10; };
    fitted = {{"dist", "lognormal"},
              {"median", round1(fit.lognormal_median)},
              {"p95", std::max(round1(fit.lognormal_p95), round1(fit.lognormal_median) + 0.1)},
              {"max", fit.max}};
  } else {
    fitted = {{"dist", "fixed"}, {"value", fit.min}};  // every sample the same: no spread to fit
  }
  return {{"lognormal", fitted},
          {"empirical", {{"dist", "empirical"}, {"values", fit.values}, {"weights", fit.weights}}}};
}

}  // namespace capsweep

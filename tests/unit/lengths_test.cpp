#include "core/lengths.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace capsweep;
using json = nlohmann::json;

namespace {

std::vector<double> draw(const LengthDist& d, int n, std::uint64_t seed = 11) {
  Rng rng(seed);
  std::vector<double> v;
  v.reserve(n);
  for (int i = 0; i < n; ++i) v.push_back(d.sample(rng));
  std::sort(v.begin(), v.end());
  return v;
}
double quantile(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<std::size_t>(q * (sorted.size() - 1))];
}

}  // namespace

TEST_CASE("fixed lengths are the value - at least 1") {
  auto v = draw(LengthDist::fixed(200), 100);
  CHECK(v.front() == 200);
  CHECK(v.back() == 200);
  CHECK(draw(LengthDist::fixed(0), 10).front() == 1);
}

TEST_CASE("uniform lengths cover min to max with the right mean") {
  auto d = LengthDist::uniform(10, 20).value();
  auto v = draw(d, 50000);
  CHECK(v.front() == 10);
  CHECK(v.back() == 20);
  double sum = 0;
  for (double x : v) sum += x;
  CHECK(sum / v.size() == Approx(15).epsilon(0.01));
  CHECK(d.nominal_mean() == 15);
}

TEST_CASE("normal lengths have the asked mean and are clamped") {
  auto d = LengthDist::normal(500, 100, 1, 100000).value();
  auto v = draw(d, 50000);
  CHECK(quantile(v, 0.5) == Approx(500).epsilon(0.01));
  CHECK(quantile(v, 0.95) == Approx(500 + 1.645 * 100).epsilon(0.01));
  auto clamped = draw(LengthDist::normal(100, 1000, 50, 150).value(), 10000);
  CHECK(clamped.front() == 50);
  CHECK(clamped.back() == 150);
}

TEST_CASE("lognormal from median and p95 reproduces both") {
  // "median 900, p95 3800", as production logs are described.
  auto d = LengthDist::lognormal(900, 3800, 1, 1000000).value();
  auto v = draw(d, 200000);
  CHECK(quantile(v, 0.5) == Approx(900).epsilon(0.02));
  CHECK(quantile(v, 0.95) == Approx(3800).epsilon(0.03));
  CHECK(v.front() >= 1);
}

TEST_CASE("empirical lengths follow their weights") {
  auto d = LengthDist::empirical({10, 100, 1000}, {1, 2, 1}).value();
  Rng rng(5);
  int c10 = 0, c100 = 0, c1000 = 0;
  for (int i = 0; i < 40000; ++i) {
    switch (d.sample(rng)) {
      case 10:
        ++c10;
        break;
      case 100:
        ++c100;
        break;
      case 1000:
        ++c1000;
        break;
      default:
        FAIL("value outside the histogram");
    }
  }
  CHECK(c10 == Approx(10000).margin(400));
  CHECK(c100 == Approx(20000).margin(500));
  CHECK(c1000 == Approx(10000).margin(400));
  CHECK(d.nominal_mean() == Approx((10 + 200 + 1000) / 4.0));
}

TEST_CASE("CSV histograms parse with a header - comments and CRLF") {
  auto d = parse_length_histogram_csv("tokens,count\r\n# short prompts\n50,3\n\n500,1\n", "/w").value();
  CHECK(d.kind() == LengthKind::empirical);
  CHECK(d.nominal_mean() == Approx((150 + 500) / 4.0));
}

TEST_CASE("CSV histogram errors name the line") {
  auto no_comma = parse_length_histogram_csv("50,1\n60 2\n", "/w/csv");
  REQUIRE_FALSE(no_comma.has_value());
  CHECK(no_comma.error().code == errc::parse_error);
  CHECK(no_comma.error().field == "/w/csv");
  CHECK(no_comma.error().message.find("line 2") != std::string::npos);
  auto bad_number = parse_length_histogram_csv("50,1\nabc,2\n", "/w");
  REQUIRE_FALSE(bad_number.has_value());
  CHECK(bad_number.error().message.find("line 2") != std::string::npos);
  auto zero = parse_length_histogram_csv("0,1\n", "/w");
  REQUIRE_FALSE(zero.has_value());
  CHECK(zero.error().message.find("line 1") != std::string::npos);
  CHECK_FALSE(parse_length_histogram_csv("", "/w").has_value());
  CHECK_FALSE(parse_length_histogram_csv("value,weight\n", "/w").has_value());
  CHECK_FALSE(parse_length_histogram_csv("5,0\n6,0\n", "/w").has_value());
  CHECK_FALSE(parse_length_histogram_csv("5,-1\n", "/w").has_value());
}

TEST_CASE("length distributions parse from JSON") {
  CHECK(parse_length_dist(json{{"dist", "fixed"}, {"value", 200}}, "/p").value().nominal_mean() == 200);
  CHECK(parse_length_dist(json(64), "/p").value().nominal_mean() == 64);
  CHECK(parse_length_dist(json{{"dist", "uniform"}, {"min", 10}, {"max", 30}}, "/p").value().nominal_mean() == 20);
  CHECK(parse_length_dist(json{{"dist", "normal"}, {"mean", 300}, {"stdev", 20}}, "/p").value().kind() ==
        LengthKind::normal);
  CHECK(parse_length_dist(json{{"dist", "lognormal"}, {"median", 900}, {"p95", 3800}, {"max", 8192}}, "/p")
            .value()
            .kind() == LengthKind::lognormal);
  CHECK(parse_length_dist(json{{"dist", "empirical"}, {"values", {1, 3}}}, "/p").value().nominal_mean() == 2);
  CHECK(parse_length_dist(json{{"dist", "empirical"}, {"values", {1, 3}}, {"weights", {3, 1}}}, "/p")
            .value()
            .nominal_mean() == 1.5);
  CHECK(parse_length_dist(json{{"dist", "empirical"}, {"csv", "7,1\n"}}, "/p").value().nominal_mean() == 7);
}

TEST_CASE("length distribution JSON errors name the field") {
  struct Case {
    json j;
    std::string field;
  };
  const std::vector<Case> cases{
      {json("200"), "/w/p"},
      {json(0), "/w/p"},
      {json::object(), "/w/p/dist"},
      {json{{"dist", "zipf"}}, "/w/p/dist"},
      {json{{"dist", "fixed"}}, "/w/p/value"},
      {json{{"dist", "fixed"}, {"value", -3}}, "/w/p/value"},
      {json{{"dist", "fixed"}, {"value", 2.5}}, "/w/p/value"},
      {json{{"dist", "uniform"}, {"min", 30}, {"max", 10}}, "/w/p/max"},
      {json{{"dist", "uniform"}, {"max", 10}}, "/w/p/min"},
      {json{{"dist", "normal"}, {"mean", 300}}, "/w/p/stdev"},
      {json{{"dist", "normal"}, {"mean", "300"}, {"stdev", 1}}, "/w/p/mean"},
      {json{{"dist", "normal"}, {"mean", 300}, {"stdev", -1}}, "/w/p/stdev"},
      {json{{"dist", "lognormal"}, {"median", 900}, {"p95", 800}}, "/w/p/p95"},
      {json{{"dist", "lognormal"}, {"median", 0.5}, {"p95", 800}}, "/w/p/median"},
      {json{{"dist", "lognormal"}, {"median", 900}, {"p95", 3800}, {"min", 10}, {"max", 5}}, "/w/p/max"},
      {json{{"dist", "empirical"}}, "/w/p/values"},
      {json{{"dist", "empirical"}, {"values", json::array()}}, "/w/p/values"},
      {json{{"dist", "empirical"}, {"values", {1, 0}}}, "/w/p/values/1"},
      {json{{"dist", "empirical"}, {"values", {1, 2}}, {"weights", {1}}}, "/w/p/weights"},
      {json{{"dist", "empirical"}, {"values", {1, 2}}, {"weights", {1, "x"}}}, "/w/p/weights/1"},
      {json{{"dist", "empirical"}, {"csv", 5}}, "/w/p/csv"},
  };
  for (const auto& c : cases) {
    INFO(c.j.dump());
    auto r = parse_length_dist(c.j, "/w/p");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == c.field);
    CHECK_FALSE(r.error().message.empty());
  }
}

TEST_CASE("a length distribution knows the largest value it can draw") {
  CHECK(LengthDist::fixed(200).upper_bound() == 200);
  CHECK(LengthDist::uniform(10, 90).value().upper_bound() == 90);
  CHECK(LengthDist::empirical({5, 700, 40}).value().upper_bound() == 700);
  CHECK(LengthDist::lognormal(900, 3800, 1, 8192).value().upper_bound() == 8192);
  CHECK(LengthDist::lognormal(900, 3800, 1, UINT32_MAX).value().upper_bound() == UINT32_MAX);
  // Draws never pass it.
  Rng rng(3);
  const auto d = LengthDist::normal(500, 400, 1, 600).value();
  for (int i = 0; i < 2000; ++i) CHECK(d.sample(rng) <= d.upper_bound());
}

TEST_CASE("lengths: a log-normal sample is fitted back to its median and p95, with a histogram that parses") {
  auto d = LengthDist::lognormal(900, 3800, 1, 1'000'000);
  REQUIRE(d.has_value());
  const auto drawn = draw(*d, 20000, 5);
  std::vector<std::uint32_t> counts(drawn.begin(), drawn.end());
  auto fit = fit_lengths(counts, 12);
  REQUIRE(fit.has_value());
  CHECK(fit->count == 20000);
  CHECK(fit->lognormal_median == Approx(900).epsilon(0.03));
  CHECK(fit->lognormal_p95 == Approx(3800).epsilon(0.05));
  CHECK(fit->p50 == Approx(900).epsilon(0.05));
  CHECK(fit->values.size() <= 12);
  double total = 0;
  for (double w : fit->weights) total += w;
  CHECK(total == 20000);
  CHECK(std::is_sorted(fit->values.begin(), fit->values.end()));
  CHECK(fit->values.front() >= fit->min);
  CHECK(fit->values.back() <= fit->max);
  // Both blocks are what a job spec takes, and the histogram keeps the sample's mean roughly.
  const json blocks = length_fit_blocks(*fit);
  CHECK(blocks["lognormal"]["dist"] == "lognormal");
  CHECK(blocks["lognormal"]["max"] == fit->max);
  REQUIRE(parse_length_dist(blocks["lognormal"], "/x").has_value());
  auto hist = parse_length_dist(blocks["empirical"], "/x");
  REQUIRE(hist.has_value());
  double mean = 0;
  for (double v : drawn) mean += v;
  mean /= static_cast<double>(drawn.size());
  CHECK(hist->nominal_mean() == Approx(mean).epsilon(0.15));
}

TEST_CASE("lengths: small and degenerate samples, and the error paths of fitting") {
  auto one = fit_lengths({7});
  REQUIRE(one.has_value());
  CHECK(one->p50 == 7);
  CHECK(one->values == std::vector<std::uint32_t>{7});
  CHECK(one->weights == std::vector<double>{1});
  const json same = length_fit_blocks(*one);
  CHECK(same["lognormal"] == json{{"dist", "fixed"}, {"value", 7}});
  REQUIRE(parse_length_dist(same["lognormal"], "/x").has_value());
  // Three distinct values with more bins than values: one bin per value at most.
  auto few = fit_lengths({1, 2, 2, 3, 3, 3}, 16);
  REQUIRE(few.has_value());
  CHECK(few->values == std::vector<std::uint32_t>{1, 2, 3});
  CHECK(few->weights == std::vector<double>{1, 2, 3});
  CHECK(few->max == 3);
  CHECK_FALSE(fit_lengths({}).has_value());
  CHECK_FALSE(fit_lengths({0, 4}).has_value());
  CHECK_FALSE(fit_lengths({3}, 0).has_value());
}

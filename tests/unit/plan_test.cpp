#include "core/plan.hpp"

#include <catch2/catch.hpp>
#include <cmath>

using namespace capsweep;

TEST_CASE("plan: linear and geometric ladders lie strictly between the two rates") {
  auto lin = ladder_rates(2, 12, 4, Spacing::linear).value();
  REQUIRE(lin.size() == 4);
  CHECK(lin[0] == Approx(4));
  CHECK(lin[3] == Approx(10));
  auto geo = ladder_rates(1, 16, 3, Spacing::geometric).value();
  REQUIRE(geo.size() == 3);
  CHECK(geo[0] == Approx(2));
  CHECK(geo[1] == Approx(4));
  CHECK(geo[2] == Approx(8));
}

TEST_CASE("plan: bad ladder parameters name the field") {
  CHECK(ladder_rates(0, 10, 3, Spacing::linear).error().field == "/r_sync");
  CHECK(ladder_rates(5, 5, 3, Spacing::linear).error().field == "/r_max");
  CHECK(ladder_rates(5, std::nan(""), 3, Spacing::linear).error().field == "/r_max");
  CHECK(ladder_rates(1, 5, 0, Spacing::geometric).error().field == "/steps");
}

TEST_CASE("plan: bisection halves the bracket until within tolerance") {
  CHECK(bisect(10, 12, 0.05) == Approx(11));
  CHECK_FALSE(bisect(10, 10.4, 0.05).has_value());
  // Repeated bisection converges: count the steps from [8, 16] to 5%.
  double pass = 8, fail = 16;
  int steps = 0;
  while (auto mid = bisect(pass, fail, 0.05)) {
    (*mid < 11.3 ? pass : fail) = *mid;  // a true capacity of 11.3
    ++steps;
  }
  CHECK(steps == 4);  // 12 fail, 10 pass, 11 pass, 11.5 fail: [11, 11.5] is within 5%
  CHECK(pass <= 11.3);
  CHECK(fail > 11.3);
  CHECK((fail - pass) / pass <= 0.05);
}

TEST_CASE("plan: the knee of a hinge is found where the slope changes") {
  // Flat at 100 ms until 10 req/s, then +50 ms per req/s, sampled at uneven rates.
  std::vector<std::pair<double, double>> pts;
  for (double x : {2.0, 4.0, 6.0, 8.0, 9.0, 11.0, 12.0, 14.0}) pts.emplace_back(x, 100 + 50 * std::max(0.0, x - 10));
  auto k = fit_knee(pts).value();
  CHECK(k.x == Approx(10).margin(0.1));
  CHECK(k.slope_before == Approx(0).margin(1e-6));
  CHECK(k.slope_after == Approx(50).epsilon(0.01));
  CHECK(k.sse == Approx(0).margin(1e-6));
}

TEST_CASE("plan: noise does not move the knee far, and a straight line has none") {
  std::vector<std::pair<double, double>> pts;
  const double noise[] = {3, -2, 4, -3, 1, -4, 2, -1, 3, -2};
  for (int i = 0; i < 10; ++i) {
    const double x = 1 + i;
    pts.emplace_back(x, 200 + 10 * x + 80 * std::max(0.0, x - 6.5) + noise[i]);
  }
  CHECK(fit_knee(pts).value().x == Approx(6.5).margin(0.5));
  std::vector<std::pair<double, double>> line{{1, 10}, {2, 20}, {3, 30}, {4, 40}, {5, 50}};
  const auto none = fit_knee(line);
  CHECK_FALSE((none && none->slope_after > none->slope_before + 1e-6));
  std::vector<std::pair<double, double>> falling{{1, 50}, {2, 40}, {3, 20}, {4, 5}, {5, 1}};
  CHECK_FALSE(fit_knee(falling).has_value());
  CHECK_FALSE(fit_knee({{1, 1}, {2, 2}, {3, 9}}).has_value());  // too few points
}

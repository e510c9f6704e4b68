#include "core/random.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

using namespace capsweep;

namespace {
struct Moments {
  double mean, var;
};
template <class F>
Moments moments(F draw, int n) {
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = draw();
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n;
  return {mean, sum2 / n - mean * mean};
}
}  // namespace

TEST_CASE("the same seed gives the same stream - another seed another") {
  Rng a(7), b(7), c(8);
  std::vector<double> xa, xb, xc;
  for (int i = 0; i < 100; ++i) {
    xa.push_back(a.gamma(0.7));
    xb.push_back(b.gamma(0.7));
    xc.push_back(c.gamma(0.7));
  }
  CHECK(xa == xb);
  CHECK(xa != xc);
}

TEST_CASE("the first draws of a seed are fixed across platforms") {
  // mt19937_64 is specified by the standard: its 10000th output for the default seed is
  // 9981545732273789042; ours must be the same engine.
  Rng r(5489);
  for (int i = 0; i < 9999; ++i) r.engine()();
  CHECK(r.engine()() == 9981545732273789042ull);
}

TEST_CASE("uniform01 lies in 0 to 1 with mean 1/2 and variance 1/12") {
  Rng r(1);
  double lo = 1, hi = 0;
  auto m = moments(
      [&] {
        const double x = r.uniform01();
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        return x;
      },
      200000);
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(m.mean == Approx(0.5).margin(0.005));
  CHECK(m.var == Approx(1.0 / 12).margin(0.002));
}

TEST_CASE("uniform_int covers its range evenly") {
  Rng r(2);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) ++counts[r.uniform_int(3, 8) - 3];
  for (int c : counts) CHECK(c == Approx(10000).margin(500));
  CHECK(r.uniform_int(5, 5) == 5);
}

TEST_CASE("exponential - normal and gamma have their moments") {
  Rng r(3);
  auto e = moments([&] { return r.exponential(); }, 200000);
  CHECK(e.mean == Approx(1.0).margin(0.01));
  CHECK(e.var == Approx(1.0).margin(0.03));
  auto n = moments([&] { return r.normal(); }, 200000);
  CHECK(n.mean == Approx(0.0).margin(0.01));
  CHECK(n.var == Approx(1.0).margin(0.02));
  for (double shape : {0.25, 0.5, 1.0, 2.0, 9.0}) {
    auto g = moments([&] { return r.gamma(shape); }, 200000);
    INFO("shape " << shape);
    CHECK(g.mean == Approx(shape).epsilon(0.02));
    CHECK(g.var == Approx(shape).epsilon(0.06));
  }
}

#include "core/time.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

using namespace capsweep;
using namespace std::chrono_literals;

TEST_CASE("durations convert from JSON milliseconds and seconds") {
  CHECK(duration_from_ms(800, "/f").value() == 800ms);
  CHECK(duration_from_ms(0.5, "/f").value() == 500us);
  CHECK(duration_from_ms(0, "/f").value() == Nanos(0));
  CHECK(duration_from_s(30, "/f").value() == 30s);
  CHECK(duration_from_s(1.25, "/f").value() == 1250ms);
  CHECK(duration_from_s(1e-9, "/f").value() == 1ns);
}

TEST_CASE("durations convert back to ms and s at the edge") {
  CHECK(to_ms(1500us) == 1.5);
  CHECK(to_s(2500ms) == 2.5);
  CHECK(to_ms(Nanos(1)) == 1e-6);
}

TEST_CASE("bad durations are errors naming the field") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double bad : {nan, inf, -inf, -1.0, -0.001}) {
    auto r = duration_from_ms(bad, "/slo/goodput/ttft_ms");
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == "/slo/goodput/ttft_ms");
    CHECK(r.error().code == errc::invalid_argument);
  }
  auto too_long = duration_from_s(31.0 * 24 * 3600, "/sweep/step_duration_s");
  REQUIRE_FALSE(too_long.has_value());
  CHECK(too_long.error().message.find("too large") != std::string::npos);
  auto neg = duration_from_s(-5, "/x");
  REQUIRE_FALSE(neg.has_value());
  CHECK(neg.error().message.find("-5") != std::string::npos);
}

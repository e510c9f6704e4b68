// The one reader of numeric fields: values, fallbacks, and an error naming the field for every
// wrong type or range.
#include "core/fields.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/numeric.hpp"

using namespace capsweep;
using json = nlohmann::json;

TEST_CASE("fields::number reads numbers and refuses what is not, naming the field") {
  const json j = {{"a", 2.5}, {"neg", -1}, {"zero", 0}, {"s", "3"}, {"big", 1e308}};
  CHECK(*fields::number(j, "a", "/x", std::nullopt) == 2.5);
  CHECK(*fields::number(j, "missing", "/x", 7.0) == 7.0);
  auto req = fields::number(j, "missing", "/x", std::nullopt);
  REQUIRE_FALSE(req.has_value());
  CHECK(req.error().field == "/x/missing");
  CHECK(req.error().message == "is required");
  auto str = fields::number(j, "s", "/x", std::nullopt);
  REQUIRE_FALSE(str.has_value());
  CHECK(str.error().field == "/x/s");
  CHECK(str.error().code == errc::invalid_argument);
  CHECK(*fields::number(j, "neg", "/x", std::nullopt) == -1);
  CHECK_FALSE(fields::number(j, "neg", "/x", std::nullopt, fields::Sign::positive).has_value());
  CHECK_FALSE(fields::number(j, "zero", "/x", std::nullopt, fields::Sign::positive).has_value());
  CHECK(*fields::number(j, "zero", "/x", std::nullopt, fields::Sign::non_negative) == 0);
  CHECK_FALSE(fields::number(j, "neg", "/x", std::nullopt, fields::Sign::non_negative).has_value());
  CHECK(fields::number(j, "neg", "/x", std::nullopt, fields::Sign::positive).error().message ==
        "must be a positive number");
  // Not an object: every key is absent.
  CHECK(*fields::number(json::array(), "a", "/x", 1.0) == 1.0);
}

TEST_CASE("fields::number_in holds both ends of its range") {
  const json j = {{"lo", 0}, {"hi", 1}, {"over", 1.0001}, {"under", -0.1}};
  CHECK(*fields::number_in(j, "lo", "", std::nullopt, 0, 1) == 0);
  CHECK(*fields::number_in(j, "hi", "", std::nullopt, 0, 1) == 1);
  auto over = fields::number_in(j, "over", "", std::nullopt, 0, 1);
  REQUIRE_FALSE(over.has_value());
  CHECK(over.error().field == "/over");
  CHECK(over.error().message == "must be a number in [0.0, 1.0]");
  CHECK_FALSE(fields::number_in(j, "under", "", std::nullopt, 0, 1).has_value());
}

TEST_CASE("fields::integer takes integers in range only") {
  const json j = {{"n", 5}, {"f", 5.5}, {"neg", -3}, {"huge", std::numeric_limits<std::uint64_t>::max()}, {"s", "5"}};
  CHECK(*fields::integer<int>(j, "n", "/p", std::nullopt, 1, 10) == 5);
  CHECK(*fields::integer<std::uint32_t>(j, "absent", "/p", 42u, 1, 10) == 42u);
  for (const char* bad : {"f", "neg", "huge", "s"}) {
    auto r = fields::integer<std::uint64_t>(j, bad, "/p", std::nullopt, 0, 1'000'000);
    INFO(bad);
    REQUIRE_FALSE(r.has_value());
    CHECK(r.error().field == std::string("/p/") + bad);
    CHECK(r.error().message == "must be an integer in [0, 1000000]");
  }
  CHECK_FALSE(fields::integer<int>(j, "n", "/p", std::nullopt, 6, 10).has_value());
  CHECK(*fields::integer<int>(j, "neg", "/p", std::nullopt, -5, 0) == -3);
}

TEST_CASE("fields::seconds reads durations, zero only where allowed") {
  using namespace std::chrono_literals;
  const json j = {{"d", 1.5}, {"zero", 0}, {"neg", -1}, {"s", "1"}, {"inf_like", 1e300}};
  CHECK(*fields::seconds(j, "d", "/c", 9s) == 1500ms);
  CHECK(*fields::seconds(j, "absent", "/c", 9s) == 9s);
  CHECK(*fields::seconds(j, "zero", "/c", 9s, true) == Nanos{0});
  auto z = fields::seconds(j, "zero", "/c", 9s);
  REQUIRE_FALSE(z.has_value());
  CHECK(z.error().field == "/c/zero");
  CHECK(z.error().message == "must be a positive number of seconds");
  CHECK_FALSE(fields::seconds(j, "neg", "/c", 9s, true).has_value());
  CHECK_FALSE(fields::seconds(j, "s", "/c", 9s).has_value());
  // Too long to hold in nanoseconds: refused, not wrapped.
  CHECK_FALSE(fields::seconds(j, "inf_like", "/c", 9s).has_value());
}

TEST_CASE("fields::Reader fills settings and keeps the first error") {
  struct Settings {
    int steps = 6;
    std::uint64_t requests = 10;
    Nanos warmup{0};
    double factor = 1.25;
    std::optional<double> cap;
    std::optional<std::uint64_t> count;
  };
  SECTION("values and defaults") {
    Settings s;
    const json j = {{"steps", 3}, {"warmup_s", 2}, {"cap", 50}};
    fields::Reader r(j, "/sweep");
    r.integer("steps", s.steps, 1, 100)
        .integer("requests", s.requests, 1, 1000)
        .seconds("warmup_s", s.warmup, true)
        .positive("factor", s.factor)
        .positive("cap", s.cap)
        .integer("count", s.count, 1, 10);
    CHECK_FALSE(r.error().has_value());
    CHECK(s.steps == 3);
    CHECK(s.requests == 10);
    CHECK(s.warmup == std::chrono::seconds(2));
    CHECK(s.factor == 1.25);
    REQUIRE(s.cap.has_value());
    CHECK(*s.cap == 50);
    CHECK_FALSE(s.count.has_value());
  }
  SECTION("the first error wins and later fields are left alone") {
    Settings s;
    const json j = {{"steps", 0}, {"factor", -1}, {"count", 3}};
    fields::Reader r(j, "/sweep");
    r.integer("steps", s.steps, 1, 100).positive("factor", s.factor).integer("count", s.count, 1, 10);
    REQUIRE(r.error().has_value());
    CHECK(r.error()->field == "/sweep/steps");
    CHECK(s.steps == 6);
    CHECK(s.factor == 1.25);
    CHECK_FALSE(s.count.has_value());
  }
}

TEST_CASE("checked_integer and saturate: a double that does not fit is never converted") {
  CHECK(capsweep::checked_integer<int>(2147483647.0) == 2147483647);
  CHECK_FALSE(capsweep::checked_integer<int>(2147483648.0).has_value());
  CHECK(capsweep::checked_integer<int>(-2147483648.0) == std::numeric_limits<int>::min());
  CHECK_FALSE(capsweep::checked_integer<int>(-2147483649.0).has_value());
  CHECK_FALSE(capsweep::checked_integer<std::uint32_t>(-1.0).has_value());
  CHECK(capsweep::checked_integer<std::uint32_t>(-0.0) == 0u);
  CHECK_FALSE(capsweep::checked_integer<std::uint64_t>(18446744073709551616.0).has_value());
  CHECK(capsweep::checked_integer<std::uint64_t>(9007199254740992.0) == 9007199254740992ull);
  CHECK_FALSE(capsweep::checked_integer<int>(std::nan("")).has_value());
  CHECK_FALSE(capsweep::checked_integer<int>(INFINITY).has_value());
  CHECK(capsweep::saturate<int>(1e300) == std::numeric_limits<int>::max());
  CHECK(capsweep::saturate<int>(-1e300) == std::numeric_limits<int>::min());
  CHECK(capsweep::saturate<std::uint32_t>(5e9) == UINT32_MAX);
  CHECK(capsweep::saturate<std::uint32_t>(-3) == 0u);
  CHECK(capsweep::saturate<std::uint32_t>(std::nan("")) == 0u);
  CHECK(capsweep::saturate<int>(41.9) == 41);
}

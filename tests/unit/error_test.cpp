#include "core/error.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;

TEST_CASE("errc names are stable") {
  CHECK(to_string(errc::invalid_argument) == "invalid_argument");
  CHECK(to_string(errc::parse_error) == "parse_error");
  CHECK(to_string(errc::not_found) == "not_found");
  CHECK(to_string(errc::conflict) == "conflict");
  CHECK(to_string(errc::forbidden) == "forbidden");
  CHECK(to_string(errc::unavailable) == "unavailable");
}

TEST_CASE("Result carries a value or an Error naming the field") {
  Result<int> ok = 42;
  REQUIRE(ok.has_value());
  CHECK(*ok == 42);

  Result<int> bad = invalid("/sweep/steps", "must be >= 1");
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().code == errc::invalid_argument);
  CHECK(bad.error().field == "/sweep/steps");
  CHECK(bad.error().message == "must be >= 1");
}

TEST_CASE("value() of an error throws ErrorException with field and message") {
  Result<int> bad = invalid("/rate_rps", "must be positive");
  try {
    (void)bad.value();
    FAIL("value() did not throw");
  } catch (const ErrorException& e) {
    CHECK(std::string(e.what()) == "/rate_rps: must be positive");
    CHECK(e.error().field == "/rate_rps");
  }
}

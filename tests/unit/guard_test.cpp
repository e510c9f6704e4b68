// The API's request guards: Host (DNS rebinding), Origin (cross-site), Content-Type (simple
// CSRF forms) and the nesting bound measured before a body is parsed.
#include "api/guard.hpp"

#include <catch2/catch.hpp>
#include <string>

using namespace capsweep;
using namespace capsweep::api;

TEST_CASE("guard: Host must be loopback, localhost, the listen address or a configured name") {
  const AllowList names = AllowList::parse({"capsweep.internal"}).value();
  for (const char* ok : {"127.0.0.1:8080", "127.1.2.3", "localhost:8080", "LOCALHOST", "[::1]:8080",
                         "[::ffff:127.0.0.1]:80", "capsweep.internal:8080", "CapSweep.Internal", "10.1.2.3:8080"}) {
    INFO(ok);
    CHECK_FALSE(check_host(ok, names, "10.1.2.3").has_value());
  }
  for (const char* bad : {"rebind.evil.example", "rebind.evil.example:8080", "10.1.2.4:8080", "[::ffff:10.0.0.1]:80",
                          "capsweep.internal.evil.example", "", "localhost.evil.example"}) {
    INFO(bad);
    auto e = check_host(bad, names, "10.1.2.3");
    REQUIRE(e.has_value());
    CHECK(e->code == errc::forbidden);
    CHECK(e->field == "Host");
  }
}

TEST_CASE("guard: allowed_hosts may name address blocks (a cluster's pod network)") {
  const AllowList pods = AllowList::parse({"10.42.0.0/16", "fd00::/8", "capsweepd.capsweep.svc"}).value();
  for (const char* ok : {"10.42.7.9:8080", "10.42.0.1", "[fd00::5]:8080", "capsweepd.capsweep.svc:8080"}) {
    INFO(ok);
    CHECK_FALSE(check_host(ok, pods, "0.0.0.0").has_value());
  }
  for (const char* bad : {"10.43.0.1:8080", "[fe80::1]:8080", "rebind.evil.example", "10.42.7.9.evil.example"}) {
    INFO(bad);
    CHECK(check_host(bad, pods, "0.0.0.0").has_value());
  }
}

TEST_CASE("guard: a browser Origin of another site is refused, none or our own is fine") {
  CHECK_FALSE(check_origin("", {}, "127.0.0.1").has_value());
  CHECK_FALSE(check_origin("http://127.0.0.1:8080", {}, "127.0.0.1").has_value());
  CHECK_FALSE(check_origin("http://localhost:8080", {}, "127.0.0.1").has_value());
  auto e = check_origin("http://evil.example", {}, "127.0.0.1");
  REQUIRE(e.has_value());
  CHECK(e->field == "Origin");
  CHECK(e->message.find("evil.example") != std::string::npos);
  CHECK(check_origin("null", {}, "127.0.0.1").has_value());  // sandboxed frames and file:// pages
}

TEST_CASE("guard: bodies must be declared as JSON") {
  CHECK_FALSE(check_json_content_type("application/json", 10).has_value());
  CHECK_FALSE(check_json_content_type("application/json; charset=utf-8", 10).has_value());
  CHECK_FALSE(check_json_content_type("Application/JSON", 10).has_value());
  CHECK_FALSE(check_json_content_type("", 0).has_value());  // no body, nothing to declare
  for (const char* bad : {"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "",
                          "application/jsonp"}) {
    INFO(bad);
    auto e = check_json_content_type(bad, 10);
    REQUIRE(e.has_value());
    CHECK(e->field == "Content-Type");
  }
}

TEST_CASE("guard: nesting deeper than the bound is found before parsing, with its place") {
  CHECK_FALSE(json_too_deep(R"({"a": {"b": [1, 2, {"c": 3}]}})", 4).has_value());
  auto deep = json_too_deep(R"({"a": {"b": [1, 2, {"c": [[1]]}]}})", 4);
  REQUIRE(deep.has_value());
  CHECK(*deep == "/a/b/2/c");
  // Brackets inside strings do not count; escaped quotes do not end a string.
  CHECK_FALSE(json_too_deep(R"({"a": "[[[[[[[[\"[[[[[[", "b": ["{{{{"]})", 3).has_value());
  // Keys with '/' and '~' are escaped as JSON pointers.
  auto esc = json_too_deep(R"({"a/b": {"c~d": [[]]}})", 3);
  REQUIRE(esc.has_value());
  CHECK(*esc == "/a~1b/c~0d/0");
  // A hostile body: 100,000 nested arrays, found at once.
  std::string hostile =
      R"({"target": {"extra_body": {"x": )" + std::string(100'000, '[') + std::string(100'000, ']') + "}}}";
  auto h = json_too_deep(hostile, 64);
  REQUIRE(h.has_value());
  CHECK(h->rfind("/target/extra_body/x/0/0", 0) == 0);
  CHECK_FALSE(json_too_deep("", 64).has_value());
  CHECK_FALSE(json_too_deep("not json at all", 64).has_value());
}

TEST_CASE("guard: host_of strips ports and brackets") {
  CHECK(host_of("[::1]:8080") == "::1");
  CHECK(host_of("a.b:80") == "a.b");
  CHECK(host_of("a.b") == "a.b");
  CHECK(host_of("") == "");
}

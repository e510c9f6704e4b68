#include "core/record.hpp"

#include <catch2/catch.hpp>
#include <set>
#include <string>

using namespace capsweep;
using namespace std::chrono_literals;

TEST_CASE("every outcome has a distinct - stable name") {
  std::set<std::string> names;
  for (std::size_t i = 0; i < kOutcomeCount; ++i) {
    names.insert(std::string(to_string(static_cast<Outcome>(i))));
  }
  CHECK(names.size() == kOutcomeCount);
  CHECK(names.count("http_5xx") == 1);
  CHECK(names.count("empty_stream") == 1);
  CHECK(to_string(Outcome::incomplete) == "incomplete");
}

TEST_CASE("first and last token come from the chunk list") {
  RequestRecord r;
  CHECK_FALSE(r.first_token().has_value());
  CHECK_FALSE(r.last_token().has_value());
  r.chunks.push_back({10ms, 1});
  r.chunks.push_back({25ms, 3});
  CHECK(*r.first_token() == 10ms);
  CHECK(*r.last_token() == 25ms);
}

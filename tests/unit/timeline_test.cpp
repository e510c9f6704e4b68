// A step over time: bins of what was scheduled, finished and in flight, and TTFT per bin.
#include "core/timeline.hpp"

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

using namespace capsweep;

namespace {
const double kNaN = std::nan("");
}

TEST_CASE("timeline: counts per bin and requests in flight at each bin's end") {
  // Sent at 0.5 s, done at 2.5 s: in flight at the ends of bins 0 and 1 (t = 1 s, 2 s).
  // Sent at 1.2 s, failed at 1.8 s: in flight at no bin end.
  // Sent at 2.1 s, never finished: in flight at the end of bin 2 (t = 3 s).
  // Scheduled at 2.9 s, never sent.
  const std::vector<TimelineRequest> rs{{0.5, 0.5, 2.5, 100, true},
                                        {1.2, 1.2, 1.8, kNaN, false},
                                        {2.1, 2.1, kNaN, 300, false},
                                        {2.9, kNaN, kNaN, kNaN, false}};
  const auto bins = timeline(rs, 1.0, 3.0);
  REQUIRE(bins.size() == 3);
  CHECK(bins[0].scheduled == 1);
  CHECK(bins[0].in_flight == 1);
  CHECK(bins[1].scheduled == 1);
  CHECK(bins[1].failed == 1);
  CHECK(bins[1].in_flight == 1);
  CHECK(bins[2].scheduled == 2);
  CHECK(bins[2].completed == 1);
  CHECK(bins[2].in_flight == 1);
  CHECK(bins[0].p95_ttft_ms == 100);
  CHECK(std::isnan(bins[1].p50_ttft_ms));  // the failed request has no first token
  CHECK(bins[2].p50_ttft_ms == 300);
  const auto j = timeline_json(bins, 1.0);
  CHECK(j["width_s"] == 1.0);
  CHECK(j["bins"].size() == 3);
  CHECK(j["bins"][1]["p50_ttft_ms"].is_null());
  CHECK(j["bins"][2]["t_s"] == 2.0);
}

TEST_CASE("timeline: TTFT percentiles of the requests scheduled in a bin, bin widths, empty inputs") {
  std::vector<TimelineRequest> rs;
  for (int i = 0; i < 20; ++i) rs.push_back({0.01 * i, 0.01 * i, 0.5, 10.0 * (i + 1), true});
  const auto bins = timeline(rs, 1.0, 1.0);
  REQUIRE(bins.size() == 1);
  CHECK(bins[0].p50_ttft_ms == Approx(105));
  CHECK(bins[0].p95_ttft_ms == Approx(190.5));
  CHECK(bins[0].completed == 20);
  CHECK(bins[0].in_flight == 0);
  CHECK(timeline_width(60) == 1);
  CHECK(timeline_width(600) == 5);
  CHECK(timeline_width(3600) == 30);
  CHECK(timeline_width(36000) == 300);
  CHECK(timeline(rs, 0, 10).empty());
  CHECK(timeline(rs, 1, 0).empty());
  CHECK(timeline({}, 1, 2).size() == 2);
}

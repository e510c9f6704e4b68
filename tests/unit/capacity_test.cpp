#include "core/capacity.hpp"

#include <catch2/catch.hpp>

using namespace capsweep;

namespace {

// A server with `slots` sequences decoding `tokens` tokens at `iteration_s` per token, fed
// `n` requests at once: batches finish in lock-step, one wave after another.
std::vector<ProbeRequest> waves(int n, int slots, int tokens, double iteration_s) {
  std::vector<ProbeRequest> out;
  for (int i = 0; i < n; ++i) {
    const int wave = i / slots;
    const double start = wave * tokens * iteration_s;
    out.push_back({0.0, start + iteration_s, start + tokens * iteration_s, static_cast<std::uint32_t>(tokens)});
  }
  return out;
}

}  // namespace

TEST_CASE("capacity: the probe's steady rate is the full batch's rate, even when batches finish in lock-step") {
  // 64 slots, 64 tokens at 25 ms: a full server completes 64 requests per 1.6 s = 40 req/s.
  const auto st = steady_throughput(waves(256, 64, 64, 0.025)).value();
  CHECK(st.method == "steady_tokens");
  CHECK(st.rate_rps == Approx(40).epsilon(0.03));
  // Completions counted between arbitrary completion ranks would be off by a wave: the
  // naive count over the same window says otherwise.
  CHECK(st.window_start_s == Approx(1.6));
}

TEST_CASE("capacity: a staggered stream gives its rate - too short a steady part falls back to the whole run") {
  std::vector<ProbeRequest> stream;
  for (int i = 0; i < 100; ++i) stream.push_back({0.0, 0.1 * i + 0.05, 0.1 * i + 1.0, 10});
  const auto st = steady_throughput(stream).value();
  CHECK(st.rate_rps == Approx(10).epsilon(0.05));

  std::vector<ProbeRequest> one_wave = waves(8, 8, 10, 0.01);  // everything in one batch
  const auto fb = steady_throughput(one_wave).value();
  CHECK(fb.method == "whole_run");
  CHECK(fb.rate_rps == Approx(8 / 0.1));
  CHECK_FALSE(steady_throughput({}).has_value());
}

TEST_CASE("capacity: a stable step is not saturated - a shortfall beyond noise is") {
  SaturationInput stable{1000, 990, 30, false, 0, std::nullopt, std::nullopt};
  const auto s = judge_saturation(stable);
  CHECK_FALSE(s.saturated);
  CHECK(s.completion_ratio == Approx(0.99));
  CHECK(s.shortfall_limit == Approx(3 * std::sqrt(62.0) + 1));

  SaturationInput short_in{1000, 900, 30, false, 0, std::nullopt, std::nullopt};
  const auto t = judge_saturation(short_in);
  CHECK(t.saturated);
  CHECK(t.completion_short);
  CHECK(t.reasons.size() == 1);
}

TEST_CASE("capacity: a growing client backlog or server queue saturates the step alone") {
  SaturationInput backlog{1000, 1000, 30, true, 40, std::nullopt, std::nullopt};
  CHECK(judge_saturation(backlog).backlog_growing);
  CHECK(judge_saturation(backlog).saturated);

  SaturationInput server{1000, 1000, 30, false, 0, 50.0, 10.0};
  const auto s = judge_saturation(server);
  CHECK(s.server_queue_growing);
  CHECK(s.saturated);

  SaturationInput noisy{1000, 1000, 30, false, 0, 5.0, 10.0};  // 5 < 3 sqrt(22) + 1
  CHECK_FALSE(judge_saturation(noisy).saturated);
}

// capsweep-core-demo: the pure core at work without any network. A toy server with a fixed
// number of slots (FCFS, prefill then one token per decode interval) is fed Poisson
// schedules at rising rates; each step's records go through the same metrics and SLO
// evaluation the service uses. Shows how TTFT from the schedule explodes past capacity
// while the step's completion rate stops following the offered rate.
//
// Usage: capsweep-core-demo [--json]

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <queue>

#include "core/lengths.hpp"
#include "core/metrics.hpp"
#include "core/schedule.hpp"
#include "core/slo.hpp"

using namespace capsweep;
using namespace std::chrono_literals;

namespace {

constexpr int kSlots = 8;
constexpr Nanos kPrefill = 60ms;
constexpr Nanos kDecode = 20ms;

// Runs one step of the toy server over `schedule`; returns its metrics.
StepMetrics simulate(const Schedule& schedule, const LengthDist& output, Nanos duration, Nanos warmup,
                     const GoodputBounds& goodput) {
  StepAccumulator acc({warmup, duration, duration + 120s, schedule.spec.rate_rps}, goodput);
  Rng rng(7);
  // Slot free times, earliest first.
  std::priority_queue<Nanos, std::vector<Nanos>, std::greater<>> free_at;
  for (int i = 0; i < kSlots; ++i) free_at.push(Nanos(0));
  RequestRecord r;
  for (Nanos t : schedule.send_times) {
    const std::uint32_t tokens = output.sample(rng);
    const Nanos start = std::max(t, free_at.top());
    free_at.pop();
    r.scheduled = r.dispatched = r.sent = t;
    r.chunks.clear();
    for (std::uint32_t k = 0; k < tokens; ++k) r.chunks.push_back({start + kPrefill + kDecode * k, 1});
    r.input_tokens = 200;
    r.output_tokens = tokens;
    r.outcome = r.chunks.back().arrival <= duration + 120s ? Outcome::ok : Outcome::incomplete;
    if (r.outcome == Outcome::incomplete) r.chunks.clear();
    free_at.push(start + kPrefill + kDecode * tokens);
    acc.add(r);
  }
  return std::move(acc).finish();
}

}  // namespace

int main(int argc, char** argv) {
  const bool as_json = argc > 1 && std::strcmp(argv[1], "--json") == 0;
  const auto output =
      parse_length_dist(nlohmann::json::parse(R"({"dist": "lognormal", "median": 40, "p95": 120, "max": 400})"),
                        "/workload/output_tokens")
          .value();
  const auto slo = parse_slo(nlohmann::json::parse(
                                 R"({"ttft_ms": {"p95": 800}, "itl_ms": {"p95": 50},
                                     "max_error_rate": 0.001, "goodput": {"ttft_ms": 800}})"))
                       .value();
  // Capacity: slots / mean service time = 8 / (60 ms + 20 ms x E[tokens]).
  const double capacity = kSlots / (to_s(kPrefill) + to_s(kDecode) * output.nominal_mean());
  const Nanos duration = 120s, warmup = 20s;

  nlohmann::json steps = nlohmann::json::array();
  if (!as_json) {
    fmt::print("toy server: {} slots, prefill {} ms, {} ms/token, mean output {:.1f} tokens\n", kSlots, to_ms(kPrefill),
               to_ms(kDecode), output.nominal_mean());
    fmt::print("capacity = slots / mean service time = {:.2f} req/s\n\n", capacity);
    fmt::print("{:>8} {:>9} {:>10} {:>11} {:>11} {:>9} {:>8}  {}\n", "offered", "achieved", "completed", "p95 TTFT",
               "p95 ITL", "goodput", "lag p99", "verdict (limiting)");
    fmt::print("{:>8} {:>9} {:>10} {:>11} {:>11} {:>9} {:>8}\n", "req/s", "req/s", "req/s", "ms", "ms", "req/s", "ms");
  }
  for (double fraction : {0.3, 0.5, 0.7, 0.85, 0.95, 1.05, 1.2}) {
    const double rate = capacity * fraction;
    const auto schedule = make_schedule({ArrivalProcess::poisson, rate, 1.0}, {duration, std::nullopt}, 42).value();
    const StepMetrics m = simulate(schedule, output, duration, warmup, slo.goodput);
    const SloEvaluation ev = evaluate_slo(slo, m);
    const auto* limiting = ev.limiting();
    if (as_json) {
      auto s = m.summary();
      s["slo"] = ev.to_json();
      steps.push_back(std::move(s));
      continue;
    }
    fmt::print("{:>8.2f} {:>9.2f} {:>10.2f} {:>11.1f} {:>11.1f} {:>9.2f} {:>8.2f}  {} ({})\n", rate,
               m.achieved_rate_rps(), m.request_throughput(), m.ttft_ms.percentile(95), m.itl_ms.percentile(95),
               m.request_goodput(), m.schedule_lag_ms.percentile(99), to_string(ev.verdict),
               limiting ? limiting->name : "-");
  }
  if (as_json) fmt::print("{}\n", nlohmann::json{{"capacity_rps", capacity}, {"steps", steps}}.dump(2));
  return 0;
}

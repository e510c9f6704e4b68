#pragma once
// The sequential decision of a step (`step.stop: "decided"`): whether a step's SLO verdict is
// already known, so that the step can end before its maximum length.
//
// A percentile bound is decided when the distribution-free interval of its percentile (the
// binomial order-statistic interval the verdict itself uses) lies wholly on one side of the
// bound, whatever the requests still in flight turn out to be: for a pass they are counted
// above the bound, for a fail below it. The step is looked at after it has measured
// `min_time` and `min_requests`, then each time its ended requests grew by `growth`; the
// looks are at most `looks`, and together they spend the SLO's 1 - confidence (Bonferroni:
// each look uses 1 - (1 - confidence) / looks), so stopping at the first decided look is
// not a licence to stop on noise. A decision needs:
//  - every percentile bound decided pass, and the point criteria (mean bounds, the error
//    rate, the goodput floor: judged on their measured values, as a fixed-length step is)
//    passing now; or
//  - one percentile bound decided fail, or an error rate decided above its bound by the
//    same one-sided binomial test.
// A pass is never decided before `min_pass_time`: a step above capacity meets its bounds
// until its queue has built, and the saturation witnesses (completion shortfall, backlog and
// server queue trends) see an overload only in proportion to the step's length; a sweep sets
// it to its fixed step length, so a decided pass has a fixed step's resolution against
// saturation. A fail may be decided from `min_time` on: it never flatters the target.
// A look taken while the generator is behind its schedule decides nothing. An SLO with no
// percentile bound has nothing to decide: such a step runs its fixed length.
// Pure: fed ended requests and asked at a moment; the step runner calls it on its thread.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/record.hpp"
#include "core/slo.hpp"
#include "core/stats.hpp"
#include "core/time.hpp"

namespace capsweep {

struct DecideSettings {
  Nanos min_time = std::chrono::seconds(10);  // measured time (after the warm-up) before the first look
  std::uint64_t min_requests = 20;            // measured requests ended before the first look
  int looks = 20;                             // at most; they share 1 - confidence
  double growth = 1.25;                       // a look waits for this many times the ended requests of the last
  Nanos min_pass_time{0};                     // measured time before a pass may be decided
};

// Why a step ended: its fixed length (stop "fixed", or nothing to decide), a decision, or the
// maximum length of a step that stayed undecided.
enum class StopReason { fixed_length, decided, max_length };
std::string_view to_string(StopReason r) noexcept;

struct Decision {
  Verdict verdict = Verdict::inconclusive;  // pass or fail
  std::string why;                          // "p95_ttft_ms: interval [412, 530] ms <= 800 ms", ...
  Nanos at{0};                              // when (from the step's origin)
  int look = 0;                             // 1-based look that decided
};

class StepDecider {
 public:
  StepDecider(const SloSpec& slo, Nanos warmup, DecideSettings settings);

  // Whether the SLO has a percentile bound: otherwise nothing can be decided.
  bool can_decide() const noexcept { return !bounds_.empty(); }
  // The confidence each look uses.
  double look_confidence() const noexcept { return look_confidence_; }
  int looks_taken() const noexcept { return looks_taken_; }

  // One ended request (requests scheduled before the warm-up are not counted).
  void add(const RequestRecord& r);
  std::uint64_t ended() const noexcept { return ended_; }

  // Whether a look is due at `now` (cheap: the caller may then gather what look() needs).
  // Looks come as the ended requests grow, and once more as soon as a pass may be decided.
  bool look_due(Nanos now) const noexcept {
    if (!can_decide() || looks_taken_ >= settings_.looks) return false;
    if (now - warmup_ < settings_.min_time || ended_ < settings_.min_requests) return false;
    return ended_ >= next_look_at_ || (!looked_for_pass_ && now - warmup_ >= settings_.min_pass_time);
  }
  // Asked at `now` (after a request ended) with the measured requests still in flight: the
  // decision when this is a look and it decides. `generator_behind`: the step's schedule lag
  // or CPU says the generator, not the target, sets the pace now.
  std::optional<Decision> look(Nanos now, std::uint64_t in_flight, bool generator_behind);

 private:
  struct Bound {
    LatencyMetric metric;
    double q;
    double bound_ms;
    std::string name;     // "p95_ttft_ms"
    std::uint64_t n = 0;  // samples
    std::uint64_t at_or_below = 0;
  };
  struct Mean {
    LatencyMetric metric;
    double bound_ms;
    double sum = 0;
    std::uint64_t n = 0;
  };
  std::optional<Decision> judge(Nanos now, std::uint64_t in_flight) const;
  bool looked_for_pass_ = false;  // a look was taken once a pass could be decided

  std::vector<Bound> bounds_;
  std::vector<Mean> means_;
  std::optional<double> max_error_rate_;
  std::optional<double> min_goodput_rps_;
  GoodputBounds goodput_;
  Nanos warmup_;
  DecideSettings settings_;
  double confidence_;
  double look_confidence_;
  std::uint64_t ended_ = 0, failed_ = 0, good_ = 0;
  int looks_taken_ = 0;
  std::uint64_t next_look_at_ = 0;  // ended requests the next look waits for (0: the first look)
};

}  // namespace capsweep

#include "core/decide.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/metrics.hpp"
#include "core/stats.hpp"

namespace capsweep {

std::string_view to_string(StopReason r) noexcept {
  switch (r) {
    case StopReason::fixed_length:
      return "fixed_length";
    case StopReason::decided:
      return "decided";
    case StopReason::max_length:
      return "max_length";
  }
  return "fixed_length";
}

namespace {

// The one value of a latency metric a successful request gives (TTFT, E2EL and their "sent"
// forms; TPOT from two tokens on). ITL gives one per token gap and is counted apart.
std::optional<double> value_ms(const RequestRecord& r, LatencyMetric m) {
  const Nanos first = *r.first_token(), last = *r.last_token();
  // An answer of no generated tokens (embeddings, rerank) has an E2EL only.
  if (!r.generated && m != LatencyMetric::e2el && m != LatencyMetric::e2el_sent) return std::nullopt;
  switch (m) {
    case LatencyMetric::ttft:
      return to_ms(first - r.scheduled);
    case LatencyMetric::ttft_sent:
      return to_ms(first - r.sent);
    case LatencyMetric::e2el:
      return to_ms(last - r.scheduled);
    case LatencyMetric::e2el_sent:
      return to_ms(last - r.sent);
    case LatencyMetric::tpot:
      if (r.output_tokens < 2) return std::nullopt;
      return to_ms(last - first) / static_cast<double>(r.output_tokens - 1);
    case LatencyMetric::itl:
      return std::nullopt;
    case LatencyMetric::ttfo: {
      const auto output = r.first_output_token();
      if (!output) return std::nullopt;
      return to_ms(*output - r.scheduled);
    }
  }
  return std::nullopt;
}

std::string percentile_name(double q, LatencyMetric m) {
  return fmt::format("{}_{}", percentile_key(q), to_string(m));
}

}  // namespace

StepDecider::StepDecider(const SloSpec& slo, Nanos warmup, DecideSettings settings)
    : max_error_rate_(slo.max_error_rate),
      min_goodput_rps_(slo.min_goodput_rps),
      goodput_(slo.goodput),
      warmup_(warmup),
      settings_(settings),
      confidence_(slo.confidence) {
  settings_.looks = std::max(1, settings_.looks);
  settings_.growth = std::max(1.0, settings_.growth);
  look_confidence_ = 1 - (1 - confidence_) / settings_.looks;
  for (const auto& lb : slo.latency) {
    if (lb.percentile) {
      bounds_.push_back({lb.metric, *lb.percentile, lb.bound_ms, percentile_name(*lb.percentile, lb.metric)});
    } else {
      means_.push_back({lb.metric, lb.bound_ms});
    }
  }
}

void StepDecider::add(const RequestRecord& r) {
  if (r.scheduled < warmup_) return;
  ++ended_;
  const bool ok = r.outcome == Outcome::ok && !r.chunks.empty();
  if (!ok) {
    // Failed requests give no latency (as in the step's metrics); cancelled ones are not the
    // target's, nor abandoned ones, whose wait so far counts above any bound it exceeded.
    if (r.outcome == Outcome::abandoned) {
      const double elapsed = to_ms(r.finished - r.scheduled);
      for (Bound& b : bounds_) {
        const bool censored = b.metric == LatencyMetric::e2el ||
                              (b.metric == LatencyMetric::ttft && r.chunks.empty()) ||
                              (b.metric == LatencyMetric::ttfo && !r.first_output_token());
        if (censored && elapsed > b.bound_ms) ++b.n;
      }
    } else if (r.outcome != Outcome::cancelled) {
      ++failed_;
    }
    return;
  }
  if (StepAccumulator::is_good(r, goodput_)) ++good_;
  for (Bound& b : bounds_) {
    if (b.metric == LatencyMetric::itl) {
      for_each_token_gap_ms(r, [&b](double gap) {
        ++b.n;
        if (gap <= b.bound_ms) ++b.at_or_below;
      });
    } else if (auto v = value_ms(r, b.metric)) {
      ++b.n;
      if (*v <= b.bound_ms) ++b.at_or_below;
    }
  }
  for (Mean& m : means_) {
    if (m.metric == LatencyMetric::itl) {
      for_each_token_gap_ms(r, [&m](double gap) {
        m.sum += gap;
        ++m.n;
      });
    } else if (auto v = value_ms(r, m.metric)) {
      m.sum += *v;
      ++m.n;
    }
  }
}

std::optional<Decision> StepDecider::look(Nanos now, std::uint64_t in_flight, bool generator_behind) {
  if (!look_due(now)) return std::nullopt;
  ++looks_taken_;
  if (now - warmup_ >= settings_.min_pass_time) looked_for_pass_ = true;
  // Looks are counted by requests ended: skipping ones the step outran only spends less.
  const auto grown = static_cast<std::uint64_t>(std::ceil(static_cast<double>(ended_) * settings_.growth));
  next_look_at_ = std::max(ended_ + 1, grown);
  if (generator_behind) return std::nullopt;
  auto d = judge(now, in_flight);
  if (d) {
    d->at = now;
    d->look = looks_taken_;
  }
  return d;
}

std::optional<Decision> StepDecider::judge(Nanos now, std::uint64_t in_flight) const {
  // Fail: one percentile bound whose interval lies above it, the requests in flight counted
  // at or below the bound (the case most favourable to a pass).
  for (const Bound& b : bounds_) {
    // ITL's gaps of requests in flight are not known in number: only ended requests count.
    const std::uint64_t pending = b.metric == LatencyMetric::itl ? 0 : in_flight;
    const std::uint64_t n = b.n + pending;
    if (n == 0) continue;
    const RankInterval r = percentile_rank_interval(n, b.q, look_confidence_);
    if (r.lower >= 0 && b.at_or_below + pending <= static_cast<std::uint64_t>(r.lower)) {
      return Decision{Verdict::fail,
                      fmt::format("{}: {} of {} samples above {:g} ms, the percentile's interval lies above the bound",
                                  b.name, n - b.at_or_below - pending, n, b.bound_ms)};
    }
  }
  // An error rate above its bound beyond chance: P(X >= failed | rate = bound) is small.
  if (max_error_rate_ && failed_ > 0) {
    const std::uint64_t n = ended_ + in_flight;
    const double tail = 1 - binomial_cdf(n, failed_ - 1, *max_error_rate_);
    if (tail <= (1 - look_confidence_) / 2) {
      return Decision{Verdict::fail, fmt::format("error_rate: {} of {} requests failed, above the bound of {:g}",
                                                 failed_, n, *max_error_rate_)};
    }
  }
  // Pass: every percentile bound's interval lies within it, the requests in flight counted
  // above the bound (the case least favourable), and the point criteria pass as measured now;
  // never before the step has run long enough to see saturation.
  if (now - warmup_ < settings_.min_pass_time) return std::nullopt;
  std::string why;
  for (const Bound& b : bounds_) {
    const std::uint64_t pending = b.metric == LatencyMetric::itl ? 0 : in_flight;
    const std::uint64_t n = b.n + pending;
    if (n == 0) return std::nullopt;
    const RankInterval r = percentile_rank_interval(n, b.q, look_confidence_);
    if (r.upper >= static_cast<std::int64_t>(n) || b.at_or_below < static_cast<std::uint64_t>(r.upper) + 1) {
      return std::nullopt;
    }
    why += fmt::format("{}{}: {} of {} samples within {:g} ms", why.empty() ? "" : "; ", b.name, b.at_or_below, n,
                       b.bound_ms);
  }
  for (const Mean& m : means_) {
    if (m.n == 0 || m.sum / static_cast<double>(m.n) > m.bound_ms) return std::nullopt;
  }
  if (max_error_rate_ && static_cast<double>(failed_) > *max_error_rate_ * static_cast<double>(ended_)) {
    return std::nullopt;
  }
  if (min_goodput_rps_) {
    const double measured_s = to_s(now - warmup_);
    if (!(measured_s > 0) || static_cast<double>(good_) / measured_s < *min_goodput_rps_) return std::nullopt;
  }
  return Decision{Verdict::pass, why};
}

}  // namespace capsweep

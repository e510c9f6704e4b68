#include "core/windows.hpp"

#include <algorithm>
#include <cmath>

namespace capsweep {

namespace {

std::optional<double> pct(std::vector<double>& v, double q) {
  if (v.empty()) return std::nullopt;
  return percentile_sorted(v, q);
}

bool is_failure(Outcome o) {
  return o != Outcome::ok && o != Outcome::cancelled;
}

}  // namespace

WindowAccumulator::WindowAccumulator(Nanos window, Nanos total, WindowGoodput goodput)
    : window_(window), total_(total), goodput_(goodput) {
  const auto n = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(to_s(total) / to_s(window))));
  slots_.resize(static_cast<std::size_t>(n));
}

int WindowAccumulator::slot_of(Nanos t) const noexcept {
  if (t < Nanos{0}) return 0;
  return std::min(windows() - 1, static_cast<int>(t / window_));
}

void WindowAccumulator::on_scheduled(Nanos scheduled) {
  ++slots_[static_cast<std::size_t>(slot_of(scheduled))].scheduled;
}

void WindowAccumulator::on_ended(const RequestRecord& rec, bool fast_rejection) {
  Slot& own = slots_[static_cast<std::size_t>(slot_of(rec.scheduled))];
  ++own.ended;
  if (rec.sent > Nanos{0} || rec.outcome != Outcome::cancelled) ++own.sent;
  if (const auto first = rec.first_token()) own.ttft_ms.push_back(to_ms(*first - rec.scheduled));
  if (is_failure(rec.outcome)) {
    ++own.errors[static_cast<std::size_t>(rec.outcome)];
    if (fast_rejection) ++own.rejected;
  }
  // Gaps between tokens, each in the window where it ended (k tokens in a chunk: k gaps).
  for (std::size_t i = 1; i < rec.chunks.size(); ++i) {
    const Chunk& c = rec.chunks[i];
    const double gap = to_ms(c.arrival - rec.chunks[i - 1].arrival) / c.tokens;
    auto& itl = slots_[static_cast<std::size_t>(slot_of(c.arrival))].itl_ms;
    for (std::uint32_t k = 0; k < c.tokens; ++k) itl.push_back(gap);
  }
  if (rec.outcome == Outcome::ok) {
    Slot& done = slots_[static_cast<std::size_t>(slot_of(rec.finished))];
    ++done.completed;
    bool good = true;
    const auto first = rec.first_token();
    if (goodput_.ttft_ms && (!first || to_ms(*first - rec.scheduled) > *goodput_.ttft_ms)) good = false;
    if (goodput_.e2el_ms && to_ms(rec.finished - rec.scheduled) > *goodput_.e2el_ms) good = false;
    if (goodput_.tpot_ms && rec.output_tokens > 1 && first && rec.last_token()) {
      const double tpot = to_ms(*rec.last_token() - *first) / (rec.output_tokens - 1);
      if (tpot > *goodput_.tpot_ms) good = false;
    }
    if (good) ++done.good;
  }
}

std::vector<WindowRow> WindowAccumulator::take_closed(Nanos now, std::uint64_t in_flight,
                                                      const std::vector<Nanos>& waiting_since,
                                                      const std::function<double(Nanos, Nanos)>& expected, bool final) {
  std::vector<WindowRow> out;
  while (next_ < windows()) {
    Slot& s = slots_[static_cast<std::size_t>(next_)];
    const Nanos start = window_ * next_, end = start + window_;
    if (now < end && !final) break;
    if (!s.in_flight_seen) {
      s.in_flight_at_end = in_flight;  // the first look after its end
      s.in_flight_seen = true;
    }
    if (!final && s.ended < s.scheduled && now < end + window_) break;
    WindowRow r;
    r.index = next_;
    r.t_start_s = to_s(start);
    r.offered_rps = expected ? expected(start, end) / to_s(window_) : 0;
    r.scheduled = s.scheduled;
    r.sent = s.sent;
    r.completed = s.completed;
    r.good = s.good;
    r.in_flight = s.in_flight_at_end;
    r.errors = s.errors;
    r.rejected = s.rejected;
    r.goodput_rps = static_cast<double>(s.good) / to_s(window_);
    for (Nanos w : waiting_since) {
      if (w >= start && w < end) {
        s.ttft_ms.push_back(to_ms(now - w));
        ++r.ttft_censored;
      }
    }
    std::sort(s.ttft_ms.begin(), s.ttft_ms.end());
    std::sort(s.itl_ms.begin(), s.itl_ms.end());
    r.p50_ttft_ms = pct(s.ttft_ms, 50);
    r.p95_ttft_ms = pct(s.ttft_ms, 95);
    r.p99_ttft_ms = pct(s.ttft_ms, 99);
    r.p95_itl_ms = pct(s.itl_ms, 95);
    s = Slot{};  // nothing of a closed window is kept
    s.in_flight_seen = true;
    out.push_back(std::move(r));
    ++next_;
  }
  return out;
}

}  // namespace capsweep

#include "core/windows.hpp"

#include <algorithm>
#include <cmath>

namespace capsweep {

namespace {

std::optional<double> pct(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::nullopt;
  return percentile_sorted(sorted, q);
}

bool is_failure(Outcome o) {
  return o != Outcome::ok && o != Outcome::cancelled && o != Outcome::abandoned;
}

constexpr double kBucketRatio = 1.01;

int bucket_of(double ms) {
  return static_cast<int>(std::floor(std::log(std::max(ms, 1e-3)) / std::log(kBucketRatio)));
}
double bucket_value(int b) {
  return std::pow(kBucketRatio, b + 0.5);
}

}  // namespace

WindowAccumulator::WindowAccumulator(Nanos window, Nanos total, GoodputBounds goodput)
    : window_(window), total_(total), goodput_(goodput) {
  const auto n = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(to_s(total) / to_s(window))));
  slots_.resize(static_cast<std::size_t>(n));
}

int WindowAccumulator::slot_of(Nanos t) const noexcept {
  if (t < Nanos{0}) return 0;
  return std::min(windows() - 1, static_cast<int>(t / window_));
}

void WindowAccumulator::on_scheduled(Nanos scheduled) {
  const int w = slot_of(scheduled);
  if (w >= next_) ++slots_[static_cast<std::size_t>(w)].scheduled;
}

void WindowAccumulator::on_ended(const RequestRecord& rec, bool fast_rejection) {
  // What belongs to the scheduled window counts only while that window is open.
  const int own_index = slot_of(rec.scheduled);
  if (own_index >= next_) {
    Slot& own = slots_[static_cast<std::size_t>(own_index)];
    ++own.ended;
    if (rec.sent > Nanos{0} || rec.outcome != Outcome::cancelled) ++own.sent;
    if (const auto first = rec.first_token()) own.ttft_ms.push_back(to_ms(*first - rec.scheduled));
    if (is_failure(rec.outcome)) {
      ++own.errors[static_cast<std::size_t>(rec.outcome)];
      if (fast_rejection) ++own.rejected;
      if (rec.outcome == Outcome::stream_error || rec.outcome == Outcome::incomplete) ++own.cut;
    }
  }
  // Gaps between tokens, each in the window where it ended (k tokens in a chunk: k gaps).
  for (std::size_t i = 1; i < rec.chunks.size(); ++i) {
    const Chunk& c = rec.chunks[i];
    const int w = slot_of(c.arrival);
    if (w < next_) continue;  // its window closed already
    const double gap = to_ms(c.arrival - rec.chunks[i - 1].arrival) / c.tokens;
    auto& itl = slots_[static_cast<std::size_t>(w)].itl_ms;
    for (std::uint32_t k = 0; k < c.tokens; ++k) itl.push_back(gap);
  }
  const int done_index = slot_of(rec.finished);
  if (rec.outcome != Outcome::ok || done_index < next_) return;
  Slot& done = slots_[static_cast<std::size_t>(done_index)];
  ++done.completed;
  if (StepAccumulator::is_good(rec, goodput_)) ++done.good;
}

namespace {

// A closed window's latency figures: TTFT p50/p95/p99/max and its 1% log buckets, ITL p95.
void set_latencies(std::vector<double>& ttft_ms, std::vector<double>& itl_ms, WindowRow& r) {
  std::sort(ttft_ms.begin(), ttft_ms.end());
  std::sort(itl_ms.begin(), itl_ms.end());
  r.p50_ttft_ms = pct(ttft_ms, 50);
  r.p95_ttft_ms = pct(ttft_ms, 95);
  r.p99_ttft_ms = pct(ttft_ms, 99);
  if (!ttft_ms.empty()) r.max_ttft_ms = ttft_ms.back();
  r.p95_itl_ms = pct(itl_ms, 95);
  for (double v : ttft_ms) {
    const int b = bucket_of(v);
    if (r.ttft_histogram.empty() || r.ttft_histogram.back().first != b)
      r.ttft_histogram.emplace_back(b, 1);
    else
      ++r.ttft_histogram.back().second;
  }
}

}  // namespace

std::vector<WindowRow> WindowAccumulator::take_closed(Nanos now, std::uint64_t in_flight,
                                                      const std::vector<LiveRequest>& live,
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
    r.cut = s.cut;
    r.goodput_rps = static_cast<double>(s.good) / to_s(window_);
    std::uint64_t live_here = 0;
    for (const LiveRequest& l : live) {
      if (l.scheduled < start || l.scheduled >= end) continue;
      ++live_here;
      if (l.first_token) {
        s.ttft_ms.push_back(to_ms(*l.first_token - l.scheduled));
      } else {
        s.ttft_ms.push_back(to_ms(now - l.scheduled));
        ++r.ttft_censored;
      }
    }
    // Requests neither ended nor in view (still queued before being sent, or the engine too
    // busy to list them): each has waited at least since the window's end.
    const std::uint64_t unseen = s.scheduled - std::min(s.scheduled, s.ended + live_here);
    for (std::uint64_t i = 0; i < unseen; ++i) {
      s.ttft_ms.push_back(to_ms(std::max(now - end, Nanos{0})));
      ++r.ttft_censored;
    }
    set_latencies(s.ttft_ms, s.itl_ms, r);
    s = Slot{};  // nothing of a closed window is kept
    s.in_flight_seen = true;
    out.push_back(std::move(r));
    ++next_;
  }
  return out;
}

nlohmann::json window_json(const WindowRow& r) {
  using json = nlohmann::json;
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json errors = json::object();
  for (std::size_t i = 0; i < kOutcomeCount; ++i) {
    if (r.errors[i] > 0) errors[std::string(to_string(static_cast<Outcome>(i)))] = r.errors[i];
  }
  json hist = json::array();
  for (const auto& [b, c] : r.ttft_histogram) hist.push_back({b, c});
  return {{"index", r.index},
          {"t_start_s", r.t_start_s},
          {"offered_rps", r.offered_rps},
          {"scheduled", r.scheduled},
          {"sent", r.sent},
          {"completed", r.completed},
          {"good", r.good},
          {"in_flight", r.in_flight},
          {"p50_ttft_ms", opt(r.p50_ttft_ms)},
          {"p95_ttft_ms", opt(r.p95_ttft_ms)},
          {"p99_ttft_ms", opt(r.p99_ttft_ms)},
          {"max_ttft_ms", opt(r.max_ttft_ms)},
          {"p95_itl_ms", opt(r.p95_itl_ms)},
          {"ttft_censored", r.ttft_censored},
          {"errors", std::move(errors)},
          {"rejected", r.rejected},
          {"cut", r.cut},
          {"goodput_rps", r.goodput_rps},
          {"ttft_histogram", std::move(hist)}};
}

WindowRow window_from_json(const nlohmann::json& j) {
  WindowRow r;
  if (!j.is_object()) return r;
  auto opt = [&j](const char* k) -> std::optional<double> {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? std::optional<double>(it->get<double>()) : std::nullopt;
  };
  r.index = j.value("index", 0);
  r.t_start_s = j.value("t_start_s", 0.0);
  r.offered_rps = j.value("offered_rps", 0.0);
  r.scheduled = j.value("scheduled", std::uint64_t{0});
  r.sent = j.value("sent", std::uint64_t{0});
  r.completed = j.value("completed", std::uint64_t{0});
  r.good = j.value("good", std::uint64_t{0});
  r.in_flight = j.value("in_flight", std::uint64_t{0});
  r.p50_ttft_ms = opt("p50_ttft_ms");
  r.p95_ttft_ms = opt("p95_ttft_ms");
  r.p99_ttft_ms = opt("p99_ttft_ms");
  r.max_ttft_ms = opt("max_ttft_ms");
  r.p95_itl_ms = opt("p95_itl_ms");
  r.ttft_censored = j.value("ttft_censored", std::uint64_t{0});
  if (auto e = j.find("errors"); e != j.end() && e->is_object()) {
    for (std::size_t i = 0; i < kOutcomeCount; ++i) {
      r.errors[i] = e->value(std::string(to_string(static_cast<Outcome>(i))), std::uint64_t{0});
    }
  }
  r.rejected = j.value("rejected", std::uint64_t{0});
  r.cut = j.value("cut", std::uint64_t{0});
  r.goodput_rps = j.value("goodput_rps", 0.0);
  if (auto h = j.find("ttft_histogram"); h != j.end() && h->is_array()) {
    for (const auto& p : *h) {
      if (p.is_array() && p.size() == 2 && p[0].is_number_integer() && p[1].is_number_unsigned()) {
        r.ttft_histogram.emplace_back(p[0].get<int>(), p[1].get<std::uint32_t>());
      }
    }
  }
  return r;
}

std::optional<double> pooled_ttft_percentile(const std::vector<const WindowRow*>& rows, double q) {
  std::map<int, std::uint64_t> merged;
  std::uint64_t n = 0;
  for (const WindowRow* r : rows) {
    for (const auto& [b, c] : r->ttft_histogram) {
      merged[b] += c;
      n += c;
    }
  }
  if (n == 0) return std::nullopt;
  const auto rank = static_cast<std::uint64_t>(std::max(1.0, std::ceil(q / 100 * static_cast<double>(n))));
  std::uint64_t seen = 0;
  for (const auto& [b, c] : merged) {
    seen += c;
    if (seen >= rank) return bucket_value(b);
  }
  return bucket_value(merged.rbegin()->first);
}

EarliestRequests::EarliestRequests(Nanos bucket, std::size_t per_bucket)
    : bucket_s_(std::max(to_s(bucket), 1e-6)), per_bucket_(std::max<std::size_t>(per_bucket, 1)) {}

std::int64_t EarliestRequests::bucket_of(double t_s) const {
  return static_cast<std::int64_t>(std::floor(std::clamp(t_s / bucket_s_, -1e15, 1e15)));
}

bool EarliestRequests::kept(double from_s, double to_s) const {
  return std::any_of(keep_.begin(), keep_.end(), [&](const auto& r) { return r.first < to_s && from_s < r.second; });
}

void EarliestRequests::keep(double from_s, double to_s) {
  if (to_s > from_s) keep_.emplace_back(from_s, to_s);
}

void EarliestRequests::forget_before(double t_s) {
  floor_s_ = std::max(floor_s_, t_s);
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const double start = static_cast<double>(it->first) * bucket_s_, end = start + bucket_s_;
    if (end > floor_s_) break;
    it = kept(start, end) ? std::next(it) : buckets_.erase(it);
  }
}

void EarliestRequests::add(const RequestSample& s) {
  if (!std::isfinite(s.scheduled_s)) return;
  if (s.scheduled_s < floor_s_ && !kept(s.scheduled_s, std::nextafter(s.scheduled_s, 1e300))) return;
  Bucket& b = buckets_[bucket_of(s.scheduled_s)];
  const auto at =
      static_cast<std::size_t>(std::upper_bound(b.kept.begin(), b.kept.end(), s.scheduled_s,
                                                [](double t, const RequestSample& k) { return t < k.scheduled_s; }) -
                               b.kept.begin());
  if (b.kept.size() >= per_bucket_) {
    b.dropped = true;
    if (at == b.kept.size()) return;  // later than every kept one
    b.kept.pop_back();
  }
  b.kept.insert(b.kept.begin() + static_cast<std::ptrdiff_t>(at), s);
}

std::vector<RequestSample> EarliestRequests::between(double from_s, double to_s) const {
  std::vector<RequestSample> out;
  if (!(to_s > from_s)) return out;
  for (auto it = buckets_.lower_bound(bucket_of(from_s)); it != buckets_.end() && it->first <= bucket_of(to_s); ++it) {
    for (const auto& s : it->second.kept) {
      if (s.scheduled_s >= from_s && s.scheduled_s < to_s) out.push_back(s);
    }
  }
  return out;
}

bool EarliestRequests::dropped_between(double from_s, double to_s) const {
  for (auto it = buckets_.lower_bound(bucket_of(from_s)); it != buckets_.end() && it->first <= bucket_of(to_s); ++it) {
    if (it->second.dropped) return true;
  }
  return false;
}

}  // namespace capsweep

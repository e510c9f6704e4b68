#include "loadgen/agent_wire.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace capsweep::loadgen {

using json = nlohmann::json;

namespace {

constexpr std::size_t kFields = 14;

// A record's chunks (its elements 11 to 13: arrivals, tokens, reasoning positions) into `r`;
// an error names the element at fault.
std::optional<Error> decode_chunks(const json& j, const std::string& field, RequestRecord& r) {
  const json& arrivals = j[11];
  const json& tokens = j[12];
  const json& reasoning = j[13];
  if (!arrivals.is_array()) return invalid(field + "/11", "the chunks' arrivals must be an array");
  if (!tokens.is_array() || (!tokens.empty() && tokens.size() != arrivals.size())) {
    return invalid(field + "/12", "the chunks' tokens must be empty or one per chunk");
  }
  if (!reasoning.is_array()) return invalid(field + "/13", "the reasoning chunks must be an array of positions");
  r.chunks.resize(arrivals.size());
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max() / 2;  // sums stay far from overflow
  std::int64_t at = 0;
  for (std::size_t i = 0; i < arrivals.size(); ++i) {
    const json& a = arrivals[i];
    if (!a.is_number_integer() || (i > 0 && a.get<std::int64_t>() < 0) || a.get<std::int64_t>() > kMax - at ||
        a.get<std::int64_t>() < -kMax) {
      return invalid(fmt::format("{}/11/{}", field, i), "an arrival must be a whole number of ns, gaps at least 0");
    }
    at += a.get<std::int64_t>();
    r.chunks[i].arrival = Nanos(at);
    if (tokens.empty()) continue;
    const json& k = tokens[i];
    // Only the one chunk of an answer of no generated tokens (flags bit 2) carries none.
    const std::uint64_t least = r.generated ? 1 : 0;
    if (!k.is_number_unsigned() || k.get<std::uint64_t>() < least || k.get<std::uint64_t>() > UINT32_MAX) {
      return invalid(fmt::format("{}/12/{}", field, i), "a chunk carries at least 1 token");
    }
    r.chunks[i].tokens = k.get<std::uint32_t>();
  }
  for (std::size_t i = 0; i < reasoning.size(); ++i) {
    const json& p = reasoning[i];
    if (!p.is_number_unsigned() || p.get<std::uint64_t>() >= r.chunks.size()) {
      return invalid(fmt::format("{}/13/{}", field, i), "a reasoning position must name one of the chunks");
    }
    r.chunks[p.get<std::size_t>()].reasoning = true;
  }
  return std::nullopt;
}

// A record's length and its optional tail: the target's error message, the items sent.
std::optional<Error> check_shape(const json& j, const std::string& field) {
  if (!j.is_array() || j.size() < kFields || j.size() > kFields + 4) {
    return invalid(field, fmt::format("a record is an array of {} elements (then the target's error message, the "
                                      "items sent, the model's index and the replica's)",
                                      kFields));
  }
  if (j.size() > kFields && (!j[kFields].is_string() || j[kFields].get_ref<const std::string&>().size() > 200)) {
    return invalid(fmt::format("{}/{}", field, kFields), "the error message must be a string of at most 200 bytes");
  }
  if (j.size() > kFields + 1 &&
      (!j[kFields + 1].is_number_unsigned() || j[kFields + 1].get<std::uint64_t>() > UINT32_MAX)) {
    return invalid(fmt::format("{}/{}", field, kFields + 1), "the items sent must be a whole number from 0 to 2^32-1");
  }
  if (j.size() > kFields + 2 && (!j[kFields + 2].is_number_unsigned() || j[kFields + 2].get<std::uint64_t>() > 65535)) {
    return invalid(fmt::format("{}/{}", field, kFields + 2), "the model must be a whole number from 0 to 65535");
  }
  if (j.size() > kFields + 3 && (!j[kFields + 3].is_number_unsigned() || j[kFields + 3].get<std::uint64_t>() > 65535)) {
    return invalid(fmt::format("{}/{}", field, kFields + 3), "the replica must be a whole number from 0 to 65535");
  }
  return std::nullopt;
}

}  // namespace

json encode_record(std::uint64_t index, const RequestRecord& rec) {
  json arrivals = json::array(), tokens = json::array(), reasoning = json::array();
  bool all_ones = true;
  Nanos before{0};
  for (std::size_t i = 0; i < rec.chunks.size(); ++i) {
    const Chunk& c = rec.chunks[i];
    arrivals.push_back((c.arrival - before).count());
    before = c.arrival;
    all_ones = all_ones && c.tokens == 1;
    if (c.reasoning) reasoning.push_back(i);
  }
  if (!all_ones) {
    for (const Chunk& c : rec.chunks) tokens.push_back(c.tokens);
  }
  const int flags = (rec.output_tokens_estimated ? 1 : 0) | (rec.streamed ? 0 : 2) | (rec.generated ? 0 : 4);
  json out = json::array({index, rec.scheduled.count(), rec.dispatched.count(), rec.sent.count(), rec.finished.count(),
                          rec.input_tokens, rec.output_tokens, rec.reasoning_tokens, static_cast<int>(rec.outcome),
                          rec.turn, flags, std::move(arrivals), std::move(tokens), std::move(reasoning)});
  // The optional tail, as far as its last element that is not the default.
  const std::size_t tail = rec.replica > 0              ? 4
                           : rec.model > 0              ? 3
                           : rec.inputs > 0             ? 2
                           : !rec.error_message.empty() ? 1
                                                        : 0;
  if (tail >= 1) out.push_back(rec.error_message);
  if (tail >= 2) out.push_back(rec.inputs);
  if (tail >= 3) out.push_back(rec.model);
  if (tail >= 4) out.push_back(rec.replica);
  return out;
}

Result<IndexedRecord> decode_record(const json& j, const std::string& field) {
  if (auto e = check_shape(j, field)) return *e;
  const auto whole = [&](std::size_t i, std::int64_t lo, std::int64_t hi) -> std::optional<std::int64_t> {
    const json& v = j[i];
    if (!v.is_number_integer()) return std::nullopt;
    const auto x = v.get<std::int64_t>();
    if (x < lo || x > hi) return std::nullopt;
    return x;
  };
  const auto bad = [&](std::size_t i, const char* what) { return invalid(fmt::format("{}/{}", field, i), what); };
  // Times within half of int64's range either way: every sum and difference of two stays exact.
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max() / 2;
  constexpr std::int64_t kU32 = std::numeric_limits<std::uint32_t>::max();
  IndexedRecord out;
  if (!j[0].is_number_unsigned() && !(j[0].is_number_integer() && j[0].get<std::int64_t>() >= 0)) {
    return bad(0, "the request index must be a whole number of at least 0");
  }
  out.index = j[0].get<std::uint64_t>();
  std::int64_t times[4] = {};
  for (std::size_t i = 1; i <= 4; ++i) {
    auto t = whole(i, -kMax, kMax);
    if (!t) return bad(i, "a time must be a whole number of nanoseconds");
    times[i - 1] = *t;
  }
  RequestRecord& r = out.rec;
  r.scheduled = Nanos(times[0]);
  r.dispatched = Nanos(times[1]);
  r.sent = Nanos(times[2]);
  r.finished = Nanos(times[3]);
  std::int64_t counts[3] = {};
  for (std::size_t i = 5; i <= 7; ++i) {
    auto c = whole(i, 0, kU32);
    if (!c) return bad(i, "a token count must be a whole number from 0 to 2^32-1");
    counts[i - 5] = *c;
  }
  r.input_tokens = static_cast<std::uint32_t>(counts[0]);
  r.output_tokens = static_cast<std::uint32_t>(counts[1]);
  r.reasoning_tokens = static_cast<std::uint32_t>(counts[2]);
  auto outcome = whole(8, 0, static_cast<std::int64_t>(kOutcomeCount) - 1);
  if (!outcome) return bad(8, "the outcome must be one of the outcome codes");
  r.outcome = static_cast<Outcome>(*outcome);
  auto turn = whole(9, 0, std::numeric_limits<std::uint16_t>::max());
  if (!turn) return bad(9, "the turn must be a whole number from 0 to 65535");
  r.turn = static_cast<std::uint16_t>(*turn);
  auto flags = whole(10, 0, 7);
  if (!flags) return bad(10, "the flags must be a whole number from 0 to 7");
  r.output_tokens_estimated = (*flags & 1) != 0;
  r.streamed = (*flags & 2) == 0;
  r.generated = (*flags & 4) == 0;
  if (!r.generated && (r.output_tokens > 0 || (j[11].is_array() && j[11].size() > 1))) {
    return bad(11, "an answer of no generated tokens has at most one chunk and no output tokens");
  }
  if (auto e = decode_chunks(j, field, r)) return *e;
  if (j.size() > kFields) r.error_message = j[kFields].get<std::string>();
  if (j.size() > kFields + 1) r.inputs = j[kFields + 1].get<std::uint32_t>();
  if (j.size() > kFields + 2) r.model = j[kFields + 2].get<std::uint16_t>();
  if (j.size() > kFields + 3) r.replica = j[kFields + 3].get<std::uint16_t>();
  return out;
}

namespace {

// The figures of a summary and where each is kept.
struct SummaryFigures {
  std::pair<const char*, double ShareSummary::*> numbers[4] = {{"lag_p99_ms", &ShareSummary::lag_p99_ms},
                                                               {"cpu_s", &ShareSummary::cpu_s},
                                                               {"loop_delay_p99_ms", &ShareSummary::loop_delay_p99_ms},
                                                               {"loop_delay_max_ms", &ShareSummary::loop_delay_max_ms}};
  std::pair<const char*, std::uint64_t ShareSummary::*> counts[2] = {
      {"peak_connections", &ShareSummary::peak_connections}, {"sent", &ShareSummary::sent}};
  std::pair<const char*, std::uint64_t ShareSummary::Sessions::*> sessions[5] = {
      {"started", &ShareSummary::Sessions::started},
      {"completed", &ShareSummary::Sessions::completed},
      {"cut", &ShareSummary::Sessions::cut},
      {"broken", &ShareSummary::Sessions::broken},
      {"turns_sent", &ShareSummary::Sessions::turns_sent}};
};

bool whole_count(const json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}

// Reads the whole counts of `members` that `j` holds into `out`, counting them in `known`.
template <class Out, std::size_t N>
std::optional<Error> read_counts(const json& j, const std::string& field,
                                 const std::pair<const char*, std::uint64_t Out::*> (&members)[N], Out& out,
                                 std::size_t& known) {
  for (const auto& [key, member] : members) {
    const auto it = j.find(std::string(key));
    if (it == j.end()) continue;
    ++known;
    const json& v = *it;
    if (!whole_count(v))
      return invalid(fmt::format("{}/{}", field, key), "a count must be a whole number of at least 0");
    out.*member = v.get<std::uint64_t>();
  }
  return std::nullopt;
}

Result<ShareSummary::Sessions> decode_sessions(const json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "sessions must be an object of session counts");
  ShareSummary::Sessions out;
  std::size_t known = 0;
  if (auto bad = read_counts(j, field, SummaryFigures{}.sessions, out, known)) return *bad;
  if (known != j.size()) return invalid(field, "sessions holds only started, completed, cut, broken and turns_sent");
  return out;
}

}  // namespace

json encode_summary(const ShareSummary& s) {
  json j = json::object();
  const SummaryFigures f;
  for (const auto& [key, member] : f.numbers) j[key] = s.*member;
  for (const auto& [key, member] : f.counts) j[key] = s.*member;
  if (s.sessions) {
    json c = json::object();
    for (const auto& [key, member] : f.sessions) c[key] = (*s.sessions).*member;
    j["sessions"] = std::move(c);
  }
  return j;
}

Result<ShareSummary> decode_summary(const json& j, const std::string& field) {
  if (!j.is_object()) return invalid(field, "the summary must be an object");
  ShareSummary out;
  std::size_t known = 0;
  const SummaryFigures f;
  for (const auto& [key, member] : f.numbers) {
    const auto it = j.find(key);
    if (it == j.end()) continue;
    ++known;
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0) {
      return invalid(fmt::format("{}/{}", field, key), "a figure must be a finite number of at least 0");
    }
    out.*member = it->get<double>();
  }
  if (auto bad = read_counts(j, field, f.counts, out, known)) return *bad;
  if (const auto it = j.find("sessions"); it != j.end()) {
    ++known;
    auto s = decode_sessions(*it, field + "/sessions");
    if (!s) return s.error();
    out.sessions = *s;
  }
  if (known != j.size()) {
    return invalid(field,
                   "the summary holds only lag_p99_ms, cpu_s, loop_delay_p99_ms, loop_delay_max_ms, "
                   "peak_connections, sent and sessions");
  }
  return out;
}

std::optional<ClockEstimate> estimate_clock(const std::vector<ClockSample>& samples) {
  std::optional<ClockEstimate> best;
  for (const ClockSample& s : samples) {
    // The round trip less capsweepd's own time: the true offset lies within half of it.
    const std::int64_t rtt = (s.t4 - s.t1) - (s.t3 - s.t2);
    if (rtt < 0) continue;  // not a real exchange
    if (!best || rtt < best->rtt_ns) {
      best = ClockEstimate{((s.t2 - s.t1) + (s.t3 - s.t4)) / 2, (rtt + 1) / 2, rtt};
    }
  }
  return best;
}

}  // namespace capsweep::loadgen

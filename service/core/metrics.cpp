#include "core/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

namespace capsweep {
namespace {

double per_second(std::uint64_t n, double seconds) {
  return seconds > 0 ? static_cast<double>(n) / seconds : 0.0;
}

// One latency's summary keys as vLLM writes them: mean_, median_, std_ and pNN_<name>_ms; each
// null where the step cannot have the latency (`absent`: answers of no generated tokens).
void put_latency(nlohmann::json& j, const char* name, const SampleSet& s, const std::vector<double>& percentiles,
                 bool absent = false) {
  const auto value = [absent](double v) { return absent ? nlohmann::json(nullptr) : nlohmann::json(v); };
  j[fmt::format("mean_{}_ms", name)] = value(s.mean());
  j[fmt::format("median_{}_ms", name)] = value(s.percentile(50));
  j[fmt::format("std_{}_ms", name)] = value(s.stddev());
  for (double q : percentiles) j[fmt::format("{}_{}_ms", percentile_key(q), name)] = value(s.percentile(q));
}

// Each session turn's latencies and prompt lengths, turn 1 first.
nlohmann::json turns_summary(const std::vector<StepMetrics::Turn>& turns, const std::vector<double>& percentiles) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t k = 0; k < turns.size(); ++k) {
    const StepMetrics::Turn& t = turns[k];
    nlohmann::json j = {{"turn", k + 1}, {"measured", t.measured}, {"completed", t.completed}};
    put_latency(j, "ttft", t.ttft_ms, percentiles);
    put_latency(j, "itl", t.itl_ms, percentiles);
    put_latency(j, "e2el", t.e2el_ms, percentiles);
    j["mean_prompt_tokens"] = t.prompt_tokens.mean();
    j["median_prompt_tokens"] = t.prompt_tokens.percentile(50);
    j["max_prompt_tokens"] = t.prompt_tokens.max();
    out.push_back(std::move(j));
  }
  return out;
}

// A latency's distribution at a fixed grid of percentiles, as [q, value] pairs, for the CDFs
// of a check's report (empty when the metric has no sample).
nlohmann::json distribution(const SampleSet& s) {
  nlohmann::json points = nlohmann::json::array();
  if (s.empty()) return points;
  for (double q : {0.0,  1.0,  2.0,  5.0,  10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0, 45.0, 50.0, 55.0,
                   60.0, 65.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0, 97.5, 99.0, 99.5, 99.9, 100.0}) {
    points.push_back({q, s.percentile(q)});
  }
  return points;
}

// The failed requests by class (abandoned ones are not failures: they have a key of their own).
nlohmann::json error_counts(const std::array<std::uint64_t, kOutcomeCount>& outcomes) {
  nlohmann::json errors = nlohmann::json::object();
  for (std::size_t i = 1; i < kOutcomeCount; ++i) {
    if (outcomes[i] && static_cast<Outcome>(i) != Outcome::abandoned) {
      errors[std::string(to_string(static_cast<Outcome>(i)))] = outcomes[i];
    }
  }
  return errors;
}

}  // namespace

std::string percentile_key(double q) {
  if (q == std::floor(q)) return fmt::format("p{}", static_cast<long long>(q));
  return fmt::format("p{}", q);
}

double StepMetrics::error_rate() const noexcept {
  return measured ? static_cast<double>(failed()) / static_cast<double>(measured) : 0.0;
}
double StepMetrics::request_throughput() const noexcept {
  return per_second(completions_in_window, duration_s());
}
double StepMetrics::output_throughput() const noexcept {
  return per_second(output_tokens_in_window, duration_s());
}
double StepMetrics::total_token_throughput() const noexcept {
  return per_second(output_tokens_in_window + input_tokens_in_window, duration_s());
}
double StepMetrics::input_throughput() const noexcept {
  return per_second(inputs_in_window, duration_s());
}
double StepMetrics::input_token_throughput() const noexcept {
  return per_second(input_tokens_in_window, duration_s());
}
double StepMetrics::request_goodput() const noexcept {
  return per_second(good_in_window, duration_s());
}
double StepMetrics::achieved_rate_rps() const noexcept {
  return per_second(sent_in_window, duration_s());
}
double StepMetrics::goodput_attainment() const noexcept {
  return measured ? static_cast<double>(good) / static_cast<double>(measured) : 0.0;
}

std::string_view StepMetrics::output_tokens_source() const noexcept {
  if (completed == 0) return "";
  if (output_tokens_estimated == 0) return "usage";
  return output_tokens_estimated == completed ? "counted" : "mixed";
}

bool StepMetrics::token_counts_disagree() const noexcept {
  const auto usage = static_cast<double>(usage_output_tokens), chunks = static_cast<double>(usage_stream_chunks);
  return std::abs(usage - chunks) > kTokenCountTolerance * std::max(usage, 1.0);
}

namespace {

// Where a step's output token counts came from, and the usage checked against the stream.
void put_token_source(nlohmann::json& j, const StepMetrics& m) {
  const std::string_view source = m.output_tokens_source();
  j["output_tokens_source"] = source.empty() ? nlohmann::json(nullptr) : nlohmann::json(source);
  if (m.usage_output_tokens == 0 && m.usage_stream_chunks == 0) return;
  const auto usage = static_cast<double>(m.usage_output_tokens), chunks = static_cast<double>(m.usage_stream_chunks);
  j["output_tokens_check"] = {
      {"usage_tokens", m.usage_output_tokens},
      {"stream_chunks", m.usage_stream_chunks},
      {"usage_tokens_per_chunk", chunks > 0 ? nlohmann::json(usage / chunks) : nlohmann::json(nullptr)},
      {"disagree", m.token_counts_disagree()}};
}

// The failures by class, what the target said of them, and the abandoned and incomplete.
void put_failures(nlohmann::json& j, const StepMetrics& m) {
  j["errors"] = error_counts(m.outcomes);
  if (!m.error_messages.empty()) {
    nlohmann::json said = nlohmann::json::array();
    for (const StepMetrics::ErrorMessage& e : m.error_messages) {
      said.push_back({{"outcome", to_string(e.outcome)}, {"message", e.message}, {"count", e.count}});
    }
    j["error_messages"] = std::move(said);
  }
  j["abandoned"] = m.abandoned();
  j["incomplete"] = m.outcomes[static_cast<std::size_t>(Outcome::incomplete)];
}

// Each model's (replica's) summary, its name under `key`, without the distributions the total
// already draws.
nlohmann::json split_summary(const StepMetrics::Split& split, const char* key, const std::vector<double>& percentiles) {
  nlohmann::json out = nlohmann::json::array();
  for (std::size_t k = 0; k < split.parts.size(); ++k) {
    nlohmann::json one = split.parts[k].summary(percentiles);
    one.erase("distribution");
    one[key] = k < split.names.size() ? split.names[k] : std::to_string(k);
    out.push_back(std::move(one));
  }
  return out;
}

}  // namespace

nlohmann::json StepMetrics::summary(const std::vector<double>& percentiles) const {
  nlohmann::json j;
  j["duration_s"] = duration_s();
  j["measured"] = measured;
  j["completed"] = completed;
  j["failed"] = failed();
  j["error_rate"] = error_rate();
  j["total_input_tokens"] = total_input_tokens;
  j["total_output_tokens"] = total_output_tokens;
  j["output_tokens_estimated"] = output_tokens_estimated;
  put_token_source(j, *this);
  j["request_throughput"] = request_throughput();
  j["output_throughput"] = output_throughput();
  j["total_token_throughput"] = total_token_throughput();
  j["request_goodput"] = request_goodput();
  j["goodput_attainment_pct"] = 100.0 * goodput_attainment();
  // JSON has no infinity: an all_at_once step's offered rate is reported as null.
  j["offered_rate_rps"] = std::isfinite(offered_rate_rps) ? nlohmann::json(offered_rate_rps) : nlohmann::json(nullptr);
  j["achieved_rate_rps"] = achieved_rate_rps();
  put_failures(j, *this);

  const bool tokenless = no_tokens();
  const auto put = [&](const char* name, const SampleSet& s, bool token = false) {
    put_latency(j, name, s, percentiles, token && tokenless);
  };
  put("ttft", ttft_ms, true);
  put("tpot", tpot_ms, true);
  put("itl", itl_ms, true);
  put("e2el", e2el_ms);
  put("ttft_sent", ttft_sent_ms, true);
  put("e2el_sent", e2el_sent_ms);
  // Reasoning models: time to the first visible token, and the thinking apart from the answer.
  put("ttfo", ttfo_ms, true);
  if (total_inputs > 0) {
    j["total_inputs"] = total_inputs;
    j["input_throughput"] = input_throughput();
  }
  j["input_token_throughput"] = input_token_throughput();
  j["total_reasoning_tokens"] = total_reasoning_tokens;
  j["total_visible_tokens"] = total_output_tokens - std::min(total_output_tokens, total_reasoning_tokens);
  j["requests_with_reasoning"] = requests_with_reasoning;
  if (requests_with_reasoning > 0) {
    put("itl_reasoning", itl_reasoning_ms);
    put("itl_output", itl_output_ms);
  }
  if (!turns.empty()) j["turns"] = turns_summary(turns, percentiles);
  if (!by_model.empty()) j["models"] = split_summary(by_model, "model", percentiles);
  if (!by_replica.empty()) j["replicas"] = split_summary(by_replica, "replica", percentiles);
  j["distribution"] = {
      {"ttft_ms", distribution(ttft_ms)}, {"itl_ms", distribution(itl_ms)}, {"e2el_ms", distribution(e2el_ms)}};
  j["itl_samples"] = itl_ms.count();
  j["p50_schedule_lag_ms"] = schedule_lag_ms.percentile(50);
  j["p99_schedule_lag_ms"] = schedule_lag_ms.percentile(99);
  j["max_schedule_lag_ms"] = schedule_lag_ms.max();
  j["mean_client_queue_ms"] = client_queue_ms.mean();
  j["p99_client_queue_ms"] = client_queue_ms.percentile(99);
  return j;
}

void StepMetrics::merge(const StepMetrics& o) {
  for (auto [mine, theirs] :
       {std::pair{&ttft_ms, &o.ttft_ms}, std::pair{&ttft_sent_ms, &o.ttft_sent_ms}, std::pair{&e2el_ms, &o.e2el_ms},
        std::pair{&e2el_sent_ms, &o.e2el_sent_ms}, std::pair{&tpot_ms, &o.tpot_ms}, std::pair{&itl_ms, &o.itl_ms},
        std::pair{&schedule_lag_ms, &o.schedule_lag_ms}, std::pair{&client_queue_ms, &o.client_queue_ms},
        std::pair{&ttfo_ms, &o.ttfo_ms}, std::pair{&itl_reasoning_ms, &o.itl_reasoning_ms},
        std::pair{&itl_output_ms, &o.itl_output_ms}}) {
    mine->merge(*theirs);
  }
  incomplete_without_first_token_ms.insert(incomplete_without_first_token_ms.end(),
                                           o.incomplete_without_first_token_ms.begin(),
                                           o.incomplete_without_first_token_ms.end());
  incomplete_elapsed_ms.insert(incomplete_elapsed_ms.end(), o.incomplete_elapsed_ms.begin(),
                               o.incomplete_elapsed_ms.end());
  incomplete_without_first_output_ms.insert(incomplete_without_first_output_ms.end(),
                                            o.incomplete_without_first_output_ms.begin(),
                                            o.incomplete_without_first_output_ms.end());
  if (turns.size() < o.turns.size()) turns.resize(o.turns.size());
  for (std::size_t k = 0; k < o.turns.size(); ++k) {
    Turn& t = turns[k];
    const Turn& u = o.turns[k];
    t.measured += u.measured;
    t.completed += u.completed;
    t.ttft_ms.merge(u.ttft_ms);
    t.itl_ms.merge(u.itl_ms);
    t.e2el_ms.merge(u.e2el_ms);
    t.prompt_tokens.merge(u.prompt_tokens);
  }
  total_reasoning_tokens += o.total_reasoning_tokens;
  requests_with_reasoning += o.requests_with_reasoning;
  total_inputs += o.total_inputs;
  pooled += o.pooled;
  by_model.merge(o.by_model);
  by_replica.merge(o.by_replica);
  inputs_in_window += o.inputs_in_window;
  measured += o.measured;
  completed += o.completed;
  good += o.good;
  for (std::size_t i = 0; i < outcomes.size(); ++i) outcomes[i] += o.outcomes[i];
  for (const ErrorMessage& e : o.error_messages) note_error(e.outcome, e.message, e.count);
  output_tokens_estimated += o.output_tokens_estimated;
  usage_output_tokens += o.usage_output_tokens;
  usage_stream_chunks += o.usage_stream_chunks;
  total_input_tokens += o.total_input_tokens;
  total_output_tokens += o.total_output_tokens;
  completions_in_window += o.completions_in_window;
  good_in_window += o.good_in_window;
  output_tokens_in_window += o.output_tokens_in_window;
  input_tokens_in_window += o.input_tokens_in_window;
  sent_in_window += o.sent_in_window;
  scheduled_in_window += o.scheduled_in_window;
}

void StepMetrics::Split::merge(const Split& other) {
  if (names.empty()) names = other.names;
  if (parts.size() < other.parts.size()) parts.resize(other.parts.size());
  for (std::size_t k = 0; k < other.parts.size(); ++k) parts[k].merge(other.parts[k]);
}

StepAccumulator::StepAccumulator(StepWindow window, GoodputBounds goodput, std::size_t exact_samples)
    : window_(window), goodput_(goodput), m_(exact_samples) {
  m_.window_start = window_.warmup;
  m_.offered_rate_rps = window_.offered_rate_rps;
}

bool StepAccumulator::is_good(const RequestRecord& r, const GoodputBounds& b) {
  if (r.outcome != Outcome::ok || r.chunks.empty()) return false;
  if (b.ttft && *r.first_token() - r.scheduled > *b.ttft) return false;
  if (b.e2el && *r.last_token() - r.scheduled > *b.e2el) return false;
  if (b.ttft_sent && *r.first_token() - r.sent > *b.ttft_sent) return false;
  if (b.e2el_sent && *r.last_token() - r.sent > *b.e2el_sent) return false;
  if (b.tpot && r.output_tokens >= 2) {
    // Compare (last - first) / (n - 1) <= bound without rounding: (last - first) <= bound * (n - 1).
    if ((*r.last_token() - *r.first_token()) > *b.tpot * (r.output_tokens - 1)) return false;
  }
  return true;
}

void StepMetrics::note_error(Outcome outcome, const std::string& message, std::uint64_t count) {
  for (ErrorMessage& e : error_messages) {
    if (e.outcome == outcome && e.message == message) {
      e.count += count;
      return;
    }
  }
  if (error_messages.size() < kMaxErrorMessages) error_messages.push_back({outcome, message, count});
}

void StepAccumulator::add(const RequestRecord& r) {
  if (r.model < by_model_.size()) by_model_[r.model].add(r);
  if (r.replica < by_replica_.size()) by_replica_[r.replica].add(r);
  const bool ok = r.outcome == Outcome::ok && !r.chunks.empty();
  const bool measured = r.scheduled >= window_.warmup && (!window_.end || r.scheduled < *window_.end);
  const bool good = measured && is_good(r, goodput_);

  // Tokens of successful and of still-running (incomplete) requests inside the window count
  // toward throughput, whichever request they belong to: a warm-up request finishing in the
  // window, or a long stream the step ended, is real work done. Failed streams' tokens do not.
  if (ok || r.outcome == Outcome::incomplete) {
    for (const Chunk& c : r.chunks) {
      if (in_window(c.arrival)) {
        m_.output_tokens_in_window += c.tokens;
        last_event_ = std::max(last_event_, c.arrival);
      }
    }
  }
  if (ok && in_window(*r.last_token())) {
    ++m_.completions_in_window;
    m_.input_tokens_in_window += r.input_tokens;
    m_.inputs_in_window += r.inputs;
    if (good) ++m_.good_in_window;
  }
  if (!measured) return;

  ++m_.measured;
  if (in_window(r.scheduled)) ++m_.scheduled_in_window;
  ++m_.outcomes[static_cast<std::size_t>(ok ? Outcome::ok
                                            : (r.outcome == Outcome::ok ? Outcome::empty_stream : r.outcome))];
  if (!ok && !r.error_message.empty()) m_.note_error(r.outcome, r.error_message);
  if (r.outcome != Outcome::cancelled) {
    if (in_window(r.sent)) ++m_.sent_in_window;
    m_.schedule_lag_ms.add(to_ms(r.dispatched - r.scheduled));
    m_.client_queue_ms.add(to_ms(r.sent - r.dispatched));
  }
  // What an abandoned request's user had waited when giving up, and an incomplete one's
  // elapsed time at the drain's end: E2EL (and TTFT, TTFO when none came yet) is at least this.
  // Not a latency sample, but a bound exceeded counts against it.
  if (r.outcome == Outcome::abandoned) add_censored(r, to_ms(r.finished - r.scheduled));
  if (r.outcome == Outcome::incomplete) add_censored(r, to_ms(window_.drain_end - r.scheduled));
  if (r.turn > 0) add_turn(r, ok);
  if (!ok) return;

  ++m_.completed;
  if (good) ++m_.good;
  if (r.output_tokens_estimated) {
    ++m_.output_tokens_estimated;
  } else if (r.streamed) {
    m_.usage_output_tokens += r.output_tokens;
    m_.usage_stream_chunks += r.chunks.size();
  }
  m_.total_input_tokens += r.input_tokens;
  m_.total_output_tokens += r.output_tokens;
  m_.total_inputs += r.inputs;
  if (!r.generated) ++m_.pooled;
  add_latencies(r);
}

void StepAccumulator::add_censored(const RequestRecord& r, double elapsed_ms) {
  m_.incomplete_elapsed_ms.push_back(elapsed_ms);
  if (r.chunks.empty()) m_.incomplete_without_first_token_ms.push_back(elapsed_ms);
  if (!r.first_output_token()) m_.incomplete_without_first_output_ms.push_back(elapsed_ms);
}

void StepAccumulator::add_latencies(const RequestRecord& r) {
  const Nanos first = *r.first_token(), last = *r.last_token();
  m_.e2el_ms.add(to_ms(last - r.scheduled));
  m_.e2el_sent_ms.add(to_ms(last - r.sent));
  if (!r.generated) return;  // an answer of no tokens has no first token, no gaps
  m_.ttft_ms.add(to_ms(first - r.scheduled));
  m_.ttft_sent_ms.add(to_ms(first - r.sent));
  // A whole answer's tokens arrived at once: the time per token is not seen (not 0).
  if (r.output_tokens >= 2 && r.streamed) {
    m_.tpot_ms.add(to_ms(last - first) / static_cast<double>(r.output_tokens - 1));
  }
  for_each_token_gap_ms(r, [this](double gap) { m_.itl_ms.add(gap); });
  if (const auto first_output = r.first_output_token()) m_.ttfo_ms.add(to_ms(*first_output - r.scheduled));
  if (r.reasoning_tokens > 0) {
    ++m_.requests_with_reasoning;
    m_.total_reasoning_tokens += r.reasoning_tokens;
    for_each_phase_gap_ms(
        r, [this](double gap, bool reasoning) { (reasoning ? m_.itl_reasoning_ms : m_.itl_output_ms).add(gap); });
  }
}

void StepAccumulator::add_turn(const RequestRecord& r, bool ok) {
  if (m_.turns.size() < r.turn) m_.turns.resize(r.turn);
  StepMetrics::Turn& t = m_.turns[r.turn - 1];
  ++t.measured;
  if (!ok) return;
  ++t.completed;
  t.ttft_ms.add(to_ms(*r.first_token() - r.scheduled));
  t.e2el_ms.add(to_ms(*r.last_token() - r.scheduled));
  for_each_token_gap_ms(r, [&t](double gap) { t.itl_ms.add(gap); });
  t.prompt_tokens.add(r.input_tokens);
}

void StepAccumulator::merge(StepAccumulator&& other) {
  m_.merge(other.m_);
  last_event_ = std::max(last_event_, other.last_event_);
  for (std::size_t k = 0; k < by_model_.size() && k < other.by_model_.size(); ++k)
    by_model_[k].merge(std::move(other.by_model_[k]));
  for (std::size_t k = 0; k < by_replica_.size() && k < other.by_replica_.size(); ++k)
    by_replica_[k].merge(std::move(other.by_replica_[k]));
}

void StepAccumulator::split_into(std::vector<StepAccumulator>& parts, StepMetrics::Split& split,
                                 const std::vector<std::string>& names) {
  parts.clear();
  split = {};
  if (names.size() < 2) return;
  split.names = names;
  for (std::size_t k = 0; k < names.size(); ++k) parts.emplace_back(window_, goodput_, StepMetrics::kTurnExactSamples);
}

void StepAccumulator::split_by_model(const std::vector<std::string>& names) {
  split_into(by_model_, m_.by_model, names);
}

void StepAccumulator::split_by_replica(const std::vector<std::string>& urls) {
  split_into(by_replica_, m_.by_replica, urls);
}

StepMetrics StepAccumulator::finish() && {
  for (auto [parts, split] : {std::pair{&by_model_, &m_.by_model}, std::pair{&by_replica_, &m_.by_replica}}) {
    for (StepAccumulator& a : *parts) {
      a.window_ = window_;  // every part's window is the step's, however it ended
      a.last_event_ = std::max(a.last_event_, last_event_);
      split->parts.push_back(std::move(a).finish());
    }
  }
  m_.window_end = window_.end ? *window_.end : std::max(last_event_, window_.warmup);
  if (window_.sessions) {
    // Sessions arrive at the offered rate; the requests are their turns as they were due.
    m_.offered_session_rate = window_.offered_rate_rps;
    const double s = m_.duration_s();
    m_.offered_rate_rps = s > 0 ? static_cast<double>(m_.scheduled_in_window) / s : 0;
  }
  return std::move(m_);
}

}  // namespace capsweep

#pragma once
// Per-step metrics, exactly as the README's "Metric definitions" defines them. The load engine feeds each
// finished request to a StepAccumulator (which keeps only bounded per-request numbers, never
// the chunk lists), then asks for the StepMetrics and the vLLM-keyed summary.

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/record.hpp"
#include "core/stats.hpp"
#include "core/time.hpp"

namespace capsweep {

// The measured window of a step and what was offered in it.
struct StepWindow {
  // Requests scheduled before `warmup` are excluded; the measured window starts here.
  Nanos warmup{0};
  // End of the measured window (the schedule's duration). When absent (count-based steps such
  // as all_at_once) the window ends at the last token received after the warm-up.
  std::optional<Nanos> end;
  // When the drain timeout abandoned in-flight requests; an `incomplete` request was still
  // running then, so its TTFT / E2EL are known to be at least drain_end - scheduled.
  Nanos drain_end{0};
  // Offered request rate (+inf for all_at_once, 0 when unknown such as concurrency mode).
  double offered_rate_rps = 0;
  // A step of sessions (workload.sessions): offered_rate_rps is the sessions' arrival rate,
  // and the step's offered request rate is its turns scheduled in the window per second.
  bool sessions = false;
};

// Per-request goodput bounds (vLLM's --goodput): a request is good when it succeeded and
// every given bound holds, inclusive. TTFT and E2EL are measured from the schedule.
// The per-request bounds of a good request. TTFT and E2EL are measured from the schedule
// (what the user waited); ttft_sent and e2el_sent from the send, as vLLM's goodput does.
struct GoodputBounds {
  std::optional<Nanos> ttft;
  std::optional<Nanos> tpot;
  std::optional<Nanos> e2el;
  std::optional<Nanos> ttft_sent;
  std::optional<Nanos> e2el_sent;
};

// The default percentiles of a summary (vLLM's 50/90/95/99 plus 99.9).
inline const std::vector<double> kDefaultPercentiles{50, 90, 95, 99, 99.9};

// Everything measured in one step. Latency samples are in milliseconds.
struct StepMetrics {
  // `exact_samples`: how many samples each latency keeps exactly before it folds into 2%-wide
  // buckets (a long step's memory stays bounded; a scenario's stays small).
  explicit StepMetrics(std::size_t exact_samples = SampleSet::kDefaultExactCapacity)
      : ttft_ms(exact_samples),
        ttft_sent_ms(exact_samples),
        e2el_ms(exact_samples),
        e2el_sent_ms(exact_samples),
        tpot_ms(exact_samples),
        itl_ms(exact_samples),
        ttfo_ms(exact_samples),
        itl_reasoning_ms(exact_samples),
        itl_output_ms(exact_samples),
        schedule_lag_ms(exact_samples),
        client_queue_ms(exact_samples) {}

  // Per-request samples over measured, successful requests.
  SampleSet ttft_ms;       // first token - scheduled
  SampleSet ttft_sent_ms;  // first token - sent (vLLM's TTFT)
  SampleSet e2el_ms;       // last token - scheduled
  SampleSet e2el_sent_ms;  // last token - sent
  SampleSet tpot_ms;       // (last - first) / (output tokens - 1), requests with >= 2 tokens
  SampleSet itl_ms;        // one sample per token gap, pooled over the step
  // Reasoning models: the first visible (not reasoning) token - scheduled, over requests that
  // sent one (= TTFT where nothing reasons); the ITL within reasoning and within the visible
  // answer (for_each_phase_gap_ms).
  SampleSet ttfo_ms;
  SampleSet itl_reasoning_ms;
  SampleSet itl_output_ms;
  // Over every measured request the generator took up (all outcomes but `cancelled`).
  SampleSet schedule_lag_ms;  // dispatched - scheduled
  SampleSet client_queue_ms;  // sent - dispatched (concurrency cap waits)
  // Incomplete requests: elapsed time since scheduled at drain end; abandoned ones: at the
  // moment their user gave up (lower bounds, for the SLO's censoring).
  std::vector<double> incomplete_without_first_token_ms;   // no first token: TTFT censored here
  std::vector<double> incomplete_elapsed_ms;               // every incomplete: E2EL censored
  std::vector<double> incomplete_without_first_output_ms;  // no visible token: TTFO censored here

  std::uint64_t measured = 0;                           // requests scheduled inside the window
  std::uint64_t completed = 0;                          // measured requests that succeeded
  std::uint64_t good = 0;                               // measured, succeeded, every goodput bound held
  std::array<std::uint64_t, kOutcomeCount> outcomes{};  // measured requests by outcome
  // What the target said of its failures: the first kMaxErrorMessages distinct messages of
  // measured requests, by outcome, with how many requests said each.
  struct ErrorMessage {
    Outcome outcome = Outcome::ok;
    std::string message;
    std::uint64_t count = 0;
  };
  static constexpr std::size_t kMaxErrorMessages = 5;
  std::vector<ErrorMessage> error_messages;
  // Counts `message` of `outcome` (a new one while fewer than kMaxErrorMessages are kept).
  void note_error(Outcome outcome, const std::string& message, std::uint64_t count = 1);
  std::uint64_t output_tokens_estimated = 0;  // completed requests without server usage
  // Over completed requests whose server sent usage: the tokens its usage counted and the
  // content chunks its stream carried (each one token or more), to catch a server that counts
  // tokens it did not stream.
  std::uint64_t usage_output_tokens = 0;
  std::uint64_t usage_stream_chunks = 0;
  std::uint64_t total_input_tokens = 0;       // over completed measured requests
  std::uint64_t total_output_tokens = 0;      // over completed measured requests
  std::uint64_t total_reasoning_tokens = 0;   // of those, reasoning (record.reasoning_tokens)
  std::uint64_t requests_with_reasoning = 0;  // completed measured requests that reasoned
  // APIs of several items per request (embeddings' inputs, rerank's documents): the items of
  // completed measured requests, and the completed ones whose answer generated no tokens.
  std::uint64_t total_inputs = 0;
  std::uint64_t pooled = 0;

  // Counted by time of occurrence inside the window, whichever request it belongs to:
  std::uint64_t completions_in_window = 0;    // successful last tokens
  std::uint64_t good_in_window = 0;           // good measured requests finishing in the window
  std::uint64_t output_tokens_in_window = 0;  // tokens of ok / incomplete requests in it
  std::uint64_t input_tokens_in_window = 0;   // prompts of requests finishing in the window
  std::uint64_t inputs_in_window = 0;         // items of requests finishing in the window
  std::uint64_t sent_in_window = 0;           // measured requests sent in the window
  std::uint64_t scheduled_in_window = 0;

  // Sessions (workload.sessions): each turn's own latencies and prompt lengths (turn k at
  // index k - 1), over measured requests of that turn; empty for a step of no session.
  static constexpr std::size_t kTurnExactSamples = std::size_t{1} << 12;
  struct Turn {
    std::uint64_t measured = 0, completed = 0;
    SampleSet ttft_ms{kTurnExactSamples}, itl_ms{kTurnExactSamples}, e2el_ms{kTurnExactSamples};
    SampleSet prompt_tokens{kTurnExactSamples};  // the server's count (usage), else expected
  };
  std::vector<Turn> turns;

  // The step broken down by a label of its requests: each value's own metrics, in order, and
  // their names; empty where the label has one value.
  struct Split {
    std::vector<std::string> names;
    std::vector<StepMetrics> parts;
    bool empty() const noexcept { return parts.empty(); }
    void merge(const Split& other);
  };
  Split by_model;    // target.models: each model's, by name
  Split by_replica;  // target.base_urls: each replica's, by URL

  Nanos window_start{0};
  Nanos window_end{0};
  double offered_rate_rps = 0;      // requests; with sessions, the turns scheduled per second
  double offered_session_rate = 0;  // sessions: their arrival rate (0 for a step of none)

  double duration_s() const noexcept { return to_s(window_end - window_start); }
  // Measured requests whose user gave up (workload.abandon): neither completed nor failed.
  std::uint64_t abandoned() const noexcept { return outcomes[static_cast<std::size_t>(Outcome::abandoned)]; }
  std::uint64_t failed() const noexcept { return measured - completed - abandoned(); }
  // Failed or incomplete measured requests over measured requests (0 when none measured).
  double error_rate() const noexcept;
  double request_throughput() const noexcept;  // successful completions in window per second
  double output_throughput() const noexcept;   // output tokens in window per second
  double total_token_throughput() const noexcept;
  double input_throughput() const noexcept;        // items (inputs, documents) in window per second
  double input_token_throughput() const noexcept;  // prompt tokens in window per second
  // Every completed request's answer generated no tokens (embeddings, rerank): TTFT, TPOT, ITL
  // and TTFO are not this step's (null in the summary, not 0).
  bool no_tokens() const noexcept { return completed > 0 && pooled == completed; }
  double request_goodput() const noexcept;     // good completions in window per second
  double achieved_rate_rps() const noexcept;   // measured requests sent per second
  double goodput_attainment() const noexcept;  // good / measured, 0..1

  // Where total_output_tokens came from: "usage" (the server's, every request), "counted" (the
  // stream's chunks, no request had usage), "mixed", or "" with no completed request.
  std::string_view output_tokens_source() const noexcept;
  // The server's usage and its stream disagree: they differ by more than kTokenCountTolerance
  // of the usage's count.
  static constexpr double kTokenCountTolerance = 0.10;
  bool token_counts_disagree() const noexcept;

  // Adds what `other` measured over the same window (another engine part of one step): samples
  // merged as one set (SampleSet::merge), counts added, censored lists joined.
  void merge(const StepMetrics& other);

  // The step summary with vLLM's key names ("p95_ttft_ms", "mean_tpot_ms", ...), plus
  // offered/achieved rate, schedule lag and error counts by class.
  nlohmann::json summary(const std::vector<double>& percentiles = kDefaultPercentiles) const;
};

// Key of a percentile as vLLM writes it: 95 -> "p95", 99.9 -> "p99.9".
std::string percentile_key(double q);

class StepAccumulator {
 public:
  explicit StepAccumulator(StepWindow window, GoodputBounds goodput = {},
                           std::size_t exact_samples = SampleSet::kDefaultExactCapacity);

  // Folds one finished, failed or abandoned request into the step. Records may arrive in
  // any order. The record's chunk list is read, not kept.
  void add(const RequestRecord& r);

  // Ends the measured window early at `end` (a step that stopped once decided; before any
  // request scheduled from `end` on was added), and the drain at `drain_end`.
  void end_window(Nanos end, Nanos drain_end) noexcept {
    for (auto* split : {&by_model_, &by_replica_}) {
      for (StepAccumulator& a : *split) a.end_window(end, drain_end);
    }
    if (!window_.end || end < *window_.end) window_.end = end;
    window_.drain_end = drain_end;
  }

  // Folds in another accumulator of the same step and window (one part of a step split by
  // index): the result is what one accumulator fed every record would hold.
  void merge(StepAccumulator&& other);

  // Keeps each model's metrics apart too (a record's `model` indexes `names`), beside the total.
  void split_by_model(const std::vector<std::string>& names);
  // Keeps each replica's metrics apart too (a record's `replica` indexes `urls`).
  void split_by_replica(const std::vector<std::string>& urls);

  // Closes the window (resolving an open end) and returns the metrics.
  StepMetrics finish() &&;

  // Whether a successful request met every goodput bound.
  static bool is_good(const RequestRecord& r, const GoodputBounds& bounds);

 private:
  bool in_window(Nanos t) const noexcept { return t >= window_.warmup && (!window_.end || t < *window_.end); }
  // A request that ended without its last token, whose latencies are known to be at least
  // `elapsed_ms` (for the SLO's censoring).
  void add_censored(const RequestRecord& r, double elapsed_ms);
  // The latency samples of a successful request.
  void add_latencies(const RequestRecord& r);
  // A measured session turn's own samples.
  void add_turn(const RequestRecord& r, bool ok);

  StepWindow window_;
  GoodputBounds goodput_;
  StepMetrics m_;
  Nanos last_event_{0};  // latest in-window event, closes an open-ended window
  // One accumulator per name into `parts`, the names into `split` (none for fewer than two).
  void split_into(std::vector<StepAccumulator>& parts, StepMetrics::Split& split,
                  const std::vector<std::string>& names);
  std::vector<StepAccumulator> by_model_, by_replica_;
};

}  // namespace capsweep

#pragma once
// The repository's row types: what a job, a step, a request, a quality item and a dataset are
// as stored and exported. Apart from the Store so that pure code (the step judge, the quality
// pass) can build rows without the repository.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace capsweep::store {

struct SweepRow {
  std::string id;
  std::string name;
  std::string kind = "sweep";     // "sweep", "check", "regression" or "scenario" (sweep::to_string(JobKind))
  std::string target_key;         // target.base_url
  std::string status = "queued";  // queued | running | succeeded | failed | cancelled
  nlohmann::json spec = nlohmann::json::object();            // without header values
  nlohmann::json secret_headers = nlohmann::json::object();  // never returned by the API
  nlohmann::json result;                                     // null until succeeded
  std::string error;
  nlohmann::json progress;  // null until running
  bool resumable = false;
  std::string created_at, started_at, finished_at, updated_at;
};

struct StepRow {
  int index = 0;
  std::string kind, phase;
  std::optional<double> offered_rate_rps;
  std::string verdict = "inconclusive";
  bool generator_limited = false;
  nlohmann::json summary = nlohmann::json::object();
  nlohmann::json evaluation = nlohmann::json::object();
  nlohmann::json outcome = nlohmann::json::object();
  nlohmann::json server;  // null when the target was not scraped
  std::string started_at, finished_at;
  std::string role;          // regression steps: "baseline" | "candidate"; "" otherwise
  std::optional<int> round;  // regression steps: the run's round, a quality step's pass
};

// One item a regression job's quality step asked, as stored and exported (quality.jsonl).
struct QualityItemRow {
  int item = 0;             // position among the items asked
  std::uint64_t entry = 0;  // the dataset item
  std::string outcome;      // "ok", "connect", "http_5xx", ...
  std::string finish_reason;
  std::optional<std::uint64_t> completion_tokens;
  std::uint32_t max_tokens = 0;
  std::string answer;                                   // the text (capped)
  nlohmann::json tool_calls = nlohmann::json::array();  // [{"name", "arguments"}]
  nlohmann::json verdicts = nlohmann::json::object();   // {"json": {"ok", "reason"}, ...}
  std::optional<double> score;                          // the judge's
};

// One request as stored; NaN / nullopt where the request has no such time.
struct RequestRow {
  std::uint64_t index = 0;
  double scheduled_ms = 0;
  std::optional<double> dispatched_ms, sent_ms, finished_ms, ttft_ms, e2el_ms;
  std::uint32_t input_tokens = 0, output_tokens = 0, chunks = 0;
  std::string outcome;
  // The request's inter-token latencies in ms, space-separated (one per token gap); "" when
  // it has fewer than two tokens.
  std::string itl_ms;
  std::uint32_t turn = 0;  // a session's turn (1-based); 0: not a session's request
};

// A stored dataset's description (its bytes are read apart: dataset_content()).
struct DatasetRow {
  std::string id, name, format, sha256;
  std::uint64_t bytes = 0, items = 0;
  nlohmann::json stats = nlohmann::json::object();
  std::string created_at;
};

}  // namespace capsweep::store

#pragma once
// One quality step of a regression job, apart from its I/O: which dataset items are asked,
// the request body of each, and what the answers say: each item's verdict per check (stored
// for quality.jsonl) and the step's tally (counts per check and a hash of every answer, which
// the regression result compares across sides and repeats).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "llm/answer.hpp"
#include "llm/dataset.hpp"
#include "store/rows.hpp"
#include "sweep/spec.hpp"
#include "sweep/step.hpp"

namespace capsweep::loadgen {
struct QualityReply;
}

namespace capsweep::sweep {

// The dataset items a quality step asks: all, or the first quality.max_items.
std::size_t quality_item_count(const QualitySettings& q, std::size_t entries);

// What a check needs of the items (the field named in a 400 when the dataset has none):
// json: response_format json_object; json_schema: response_format json_schema; tool_calls:
// tools; accuracy: expect. nullopt when the items serve every check asked.
std::optional<Error> quality_items_problem(const QualitySettings& q, const std::vector<llm::DatasetEntry>& entries,
                                           bool judge);

// The judged step: its summary (QualityTally's form) and its item rows.
struct JudgedQuality {
  nlohmann::json summary;
  std::vector<store::QualityItemRow> items;
  std::uint64_t answered = 0, failed = 0;
};
// Judges the answers of one pass. `replies[i]` answers entries[i]; `scores[i]` is the judge's
// score of that answer (empty when no judge ran).
JudgedQuality judge_quality(const QualitySettings& q, Role role, int pass,
                            const std::vector<llm::DatasetEntry>& entries,
                            const std::vector<loadgen::QualityReply>& replies,
                            const std::vector<std::optional<double>>& scores);

// The stored row of a quality step (the pass's tally as its summary, the human-labelled
// calibration scores when the judge scored them): pass when every item was answered; the
// quality verdicts are the job's result's.
store::StepRow quality_step_row(const StepOrder& order, int index, const JudgedQuality& judged,
                                const std::vector<std::optional<double>>& calibration_scores);

// The reference a judge compares an answer with (expect.answer, else expect.contains); "" when
// the item has none.
std::string judge_reference(const llm::DatasetEntry& e);
// The judge's prompt for one answer: the template with {question}, {reference} and {answer}
// replaced (each once per occurrence, the inserted text never re-read).
std::string judge_prompt(const std::string& template_text, const llm::DatasetEntry& e, const std::string& answer);
// The same for a calibration item's question, reference and answer.
std::string judge_prompt(const std::string& template_text, const std::string& question, const std::string& reference,
                         const std::string& answer);

// Answers longer than this are stored cut (the verdicts are made on the whole answer).
inline constexpr std::size_t kStoredAnswerBytes = 16 * 1024;

}  // namespace capsweep::sweep

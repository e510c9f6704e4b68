// A regression job's quality steps: every item asked of one side, the answers judged (and
// scored by the judge), the step stored with one row per item.

#include <fmt/format.h>

#include <cmath>

#include "llm/answer.hpp"
#include "loadgen/quality_runner.hpp"
#include "store/store.hpp"
#include "sweep/manager_parts.hpp"
#include "sweep/quality_pass.hpp"

namespace capsweep::sweep {

namespace {

// A regression's quality step: every quality item asked of one side, the answers judged item
// by item and (with a judge) scored; the judge first scores its calibration set in the
// baseline's first pass.
class QualityStep final : public StepExecutor {
 public:
  QualityStep(const PreparedJob& p, const std::shared_ptr<ActiveJob>& active, const StepOrder& order, int index,
              const ManagerOptions& options, std::function<bool()> stopping)
      : spec_(p.spec),
        entries_(p.quality_entries),
        active_(active),
        order_(order),
        index_(index),
        options_(options),
        stopping_(std::move(stopping)),
        runner_(endpoint(side_target())) {}

  loadgen::RunControl* control() override { return &runner_; }
  Nanos length() const override { return Nanos{0}; }
  void run() override {
    const QualitySettings& q = *spec_.quality;
    std::vector<std::string> bodies;
    bodies.reserve(entries_.size());
    for (const auto& e : entries_)
      bodies.push_back(llm::quality_body(side_target(), e, q.max_tokens, spec_.workload.seed));
    replies_ = runner_.run(bodies, q.concurrency);
    const bool go_on = !active_->cancel && !stopping_();
    if (spec_.judge && spec_.judge->calibration && order_.role == Role::baseline && order_.round == 0 && go_on)
      calibration_scores_ = judge_calibration();
    if (spec_.judge && !active_->cancel && !stopping_()) scores_ = judge_answers();
  }
  std::string failure() const override { return {}; }
  bool cut_short() const override { return false; }  // a cancel or a stop is the skeleton's to see
  StoredStep judge() override {
    const JudgedQuality judged = judge_quality(*spec_.quality, *order_.role, order_.round, entries_, replies_, scores_);
    StoredStep s;
    s.row = quality_step_row(order_, index_, judged, calibration_scores_);
    s.items = judged.items;
    s.requests_sent = judged.answered + judged.failed;
    s.log =
        fmt::format("({}): {} of {} items answered", order_.phase, judged.answered, judged.answered + judged.failed);
    return s;
  }

 private:
  const llm::Target& side_target() const {
    return order_.role == Role::candidate ? spec_.candidate->target : spec_.target;
  }
  loadgen::EndpointFactory endpoint(const llm::Target& t) const {
    return options_.endpoint ? options_.endpoint : loadgen::http_endpoint(t);
  }
  // The judge's score of each answered item that has a reference (nullopt for the others).
  std::vector<std::optional<double>> judge_answers() {
    std::vector<std::optional<double>> scores(replies_.size());
    std::vector<std::string> prompts;
    std::vector<std::size_t> asked;
    for (std::size_t i = 0; i < replies_.size() && i < entries_.size(); ++i) {
      if (!replies_[i].asked || judge_reference(entries_[i]).empty()) continue;
      const llm::Answer a = llm::assemble_answer(replies_[i].events);
      if (!a.error.empty() || a.malformed) continue;
      prompts.push_back(judge_prompt(spec_.judge->template_text, entries_[i], a.text));
      asked.push_back(i);
    }
    const auto given = ask_judge(prompts);
    for (std::size_t k = 0; k < asked.size() && k < given.size(); ++k) scores[asked[k]] = given[k];
    return scores;
  }
  // The judge's score of each calibration item (judge.calibration), in order.
  std::vector<std::optional<double>> judge_calibration() {
    const JudgeSettings& judge = *spec_.judge;
    std::vector<std::string> prompts;
    for (const JudgeLabel& l : judge.calibration->items)
      prompts.push_back(judge_prompt(judge.template_text, l.question, l.reference, l.answer));
    return ask_judge(prompts);
  }
  // Asks the judge each prompt; its score of each (nullopt where it gave none). The judge's
  // runner is what a cancel or the time limit stops meanwhile.
  std::vector<std::optional<double>> ask_judge(const std::vector<std::string>& prompts) {
    const JudgeSettings& judge = *spec_.judge;
    std::vector<std::string> bodies;
    bodies.reserve(prompts.size());
    for (const auto& prompt : prompts) bodies.push_back(llm::judge_body(judge.target, prompt));
    loadgen::QualityRunner runner(endpoint(judge.target));
    active_->switch_runner(&runner);
    const auto verdicts = runner.run(bodies, spec_.quality->concurrency);
    active_->switch_runner(nullptr);
    std::vector<std::optional<double>> scores(prompts.size());
    for (std::size_t k = 0; k < scores.size() && k < verdicts.size(); ++k) {
      scores[k] = llm::judge_score(llm::assemble_answer(verdicts[k].events).text, judge.scale);
    }
    return scores;
  }

  const JobSpec& spec_;
  const std::vector<llm::DatasetEntry>& entries_;
  std::shared_ptr<ActiveJob> active_;
  const StepOrder& order_;
  int index_;
  const ManagerOptions& options_;
  std::function<bool()> stopping_;
  loadgen::QualityRunner runner_;
  std::vector<loadgen::QualityReply> replies_;
  std::vector<std::optional<double>> scores_, calibration_scores_;
};

}  // namespace

std::unique_ptr<StepExecutor> SweepManager::quality_executor(PreparedJob& p, const std::shared_ptr<ActiveJob>& active,
                                                             const StepOrder& order, int index) {
  return std::make_unique<QualityStep>(p, active, order, index, options_, [this] { return stopping(); });
}

}  // namespace capsweep::sweep

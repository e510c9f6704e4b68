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

using json = nlohmann::json;

// The judge's score of each answered item that has a reference (nullopt for the others).
std::vector<std::optional<double>> SweepManager::judge_answers(const JobSpec& spec,
                                                               const std::vector<llm::DatasetEntry>& entries,
                                                               const std::vector<loadgen::QualityReply>& replies,
                                                               const std::shared_ptr<Active>& active) {
  const JudgeSettings& judge = *spec.judge;
  std::vector<std::optional<double>> scores(replies.size());
  std::vector<std::string> prompts;
  std::vector<std::size_t> asked;
  for (std::size_t i = 0; i < replies.size() && i < entries.size(); ++i) {
    if (!replies[i].asked || judge_reference(entries[i]).empty()) continue;
    const llm::Answer a = llm::assemble_answer(replies[i].events);
    if (!a.error.empty() || a.malformed) continue;
    prompts.push_back(judge_prompt(judge.template_text, entries[i], a.text));
    asked.push_back(i);
  }
  const auto given = ask_judge(spec, prompts, active);
  for (std::size_t k = 0; k < asked.size() && k < given.size(); ++k) scores[asked[k]] = given[k];
  return scores;
}

std::vector<std::optional<double>> SweepManager::judge_calibration(const JobSpec& spec,
                                                                   const std::shared_ptr<Active>& active) {
  const JudgeSettings& judge = *spec.judge;
  std::vector<std::string> prompts;
  for (const JudgeLabel& l : judge.calibration->items)
    prompts.push_back(judge_prompt(judge.template_text, l.question, l.reference, l.answer));
  return ask_judge(spec, prompts, active);
}

std::vector<std::optional<double>> SweepManager::ask_judge(const JobSpec& spec, const std::vector<std::string>& prompts,
                                                           const std::shared_ptr<Active>& active) {
  const JudgeSettings& judge = *spec.judge;
  std::vector<std::string> bodies;
  bodies.reserve(prompts.size());
  for (const auto& prompt : prompts) bodies.push_back(llm::judge_body(judge.target, prompt));
  loadgen::QualityRunner runner(options_.endpoint ? options_.endpoint : loadgen::http_endpoint(judge.target));
  active->switch_runner(&runner);
  const auto verdicts = runner.run(bodies, spec.quality->concurrency);
  active->switch_runner(nullptr);
  std::vector<std::optional<double>> scores(prompts.size());
  for (std::size_t k = 0; k < scores.size() && k < verdicts.size(); ++k) {
    scores[k] = llm::judge_score(llm::assemble_answer(verdicts[k].events).text, judge.scale);
  }
  return scores;
}

bool SweepManager::run_quality_step(const store::SweepRow& row, Prepared& p, const std::shared_ptr<Active>& active,
                                    const StepOrder& order, int index, int steps_planned) {
  const std::string& id = row.id;
  const QualitySettings& q = *p.spec.quality;
  const llm::Target& target = order.role == Role::candidate ? p.spec.candidate->target : p.spec.target;
  std::vector<std::string> bodies;
  bodies.reserve(p.quality_entries.size());
  for (const auto& e : p.quality_entries)
    bodies.push_back(llm::quality_body(target, e, q.max_tokens, p.spec.workload.seed));
  loadgen::QualityRunner runner(options_.endpoint ? options_.endpoint : loadgen::http_endpoint(target));
  active->enter_step(order, index, steps_planned, &runner, Nanos{0});
  store_->set_progress(id, {{"phase", order.phase},
                            {"step", index + 1},
                            {"steps_planned", steps_planned},
                            {"percent", std::round(1000.0 * index / steps_planned) / 10}});
  if (active->cancel) runner.cancel();
  const std::string started_at = store::utc_now();
  bool over_time = false;
  std::vector<loadgen::QualityReply> replies;
  std::vector<std::optional<double>> scores, calibration_scores;
  {
    StepDeadline deadline(*active, p.started + options_.max_total_sweep);
    replies = runner.run(bodies, q.concurrency);
    // The judge scores the human-labelled answers first (once, in the baseline's first pass),
    // then this pass's answers.
    if (p.spec.judge && p.spec.judge->calibration && order.role == Role::baseline && order.round == 0 &&
        !active->cancel && !stopping())
      calibration_scores = judge_calibration(p.spec, active);
    if (p.spec.judge && !active->cancel && !stopping())
      scores = judge_answers(p.spec, p.quality_entries, replies, active);
    over_time = deadline.end_step();
  }
  store_->end_step_attempt(id);
  if (over_time) {
    finish(id, "failed", nullptr,
           fmt::format("the job reached the service's max_total_sweep_s limit during step {}", index));
    return false;
  }
  if (active->cancel || stopping()) return true;  // not stored; the caller's loop says why
  const JudgedQuality judged = judge_quality(q, *order.role, order.round, p.quality_entries, replies, scores);
  store::StepRow step = quality_step_row(order, index, judged, calibration_scores);
  step.started_at = started_at;
  step.finished_at = store::utc_now();
  store_->append_step(id, step, {}, judged.items);
  stats_.steps_run++;
  stats_.requests_sent += judged.answered + judged.failed;
  log_line(fmt::format("sweep {} step {} ({}): {} of {} items answered", id, index, order.phase, judged.answered,
                       judged.answered + judged.failed));
  return true;
}
}  // namespace capsweep::sweep

#include "sweep/quality_pass.hpp"

#include <fmt/format.h>

#include "core/quality.hpp"
#include "core/text.hpp"
#include "loadgen/quality_runner.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

json item_fields(const llm::DatasetEntry& e) {
  if (e.quality.empty()) return json::object();
  json q = json::parse(e.quality, nullptr, false);
  return q.is_object() ? q : json::object();
}

std::string format_type(const json& fields) {
  const json rf = fields.value("response_format", json::object());
  return rf.is_object() ? rf.value("type", "") : std::string();
}

// Whether check `c` applies to an item with these quality fields.
bool applies(QualityCheck c, const json& fields) {
  switch (c) {
    case QualityCheck::json:
      return format_type(fields) == "json_object";
    case QualityCheck::json_schema:
      return format_type(fields) == "json_schema";
    case QualityCheck::tool_calls:
      return fields.contains("tools");
    case QualityCheck::accuracy:
      return fields.contains("expect");
    case QualityCheck::max_length:
    case QualityCheck::determinism:
      return true;
  }
  return false;
}

QualityVerdict judge_one(QualityCheck c, const json& fields, const llm::Answer& a, std::uint32_t max_tokens) {
  switch (c) {
    case QualityCheck::json:
      return check_json_answer(a.text);
    case QualityCheck::json_schema: {
      auto instance = answer_json(a.text);
      if (!instance) return {false, check_json_answer(a.text).reason};
      const json schema = fields["response_format"].value("json_schema", json::object()).value("schema", json());
      return check_schema(*instance, schema);
    }
    case QualityCheck::tool_calls:
      return check_tool_calls(a.tool_calls, fields["tools"], fields.value("tool_choice", json()));
    case QualityCheck::max_length:
      if (!a.completion_tokens) return {false, "the answer reported no usage.completion_tokens"};
      return check_length(*a.completion_tokens, max_tokens, a.finish_reason);
    case QualityCheck::accuracy:
      return check_expected(a.text, fields["expect"]);
    case QualityCheck::determinism:
      return {true, ""};
  }
  return {false, "unknown check"};
}

// A hash of everything the answer says (text and calls), for exact-match comparisons.
std::string answer_hash(const llm::Answer& a) {
  std::string all = a.text;
  for (const auto& c : a.tool_calls) all += "\x1f" + c.name + "\x1e" + c.arguments;
  return llm::sha256_hex(all).substr(0, 16);
}

json tool_calls_json(const llm::Answer& a) {
  json calls = json::array();
  for (const auto& c : a.tool_calls) {
    calls.push_back({{"name", printable_ascii(c.name, 200)}, {"arguments", cut_utf8(c.arguments, 4096)}});
  }
  return calls;
}

}  // namespace

std::size_t quality_item_count(const QualitySettings& q, std::size_t entries) {
  return q.max_items > 0 ? std::min<std::size_t>(q.max_items, entries) : entries;
}

std::optional<Error> quality_items_problem(const QualitySettings& q, const std::vector<llm::DatasetEntry>& entries,
                                           bool judge) {
  const std::size_t n = quality_item_count(q, entries.size());
  if (n == 0) return invalid("/quality/dataset", "the dataset has no items");
  for (std::size_t i = 0; i < q.checks.size(); ++i) {
    const QualityCheck c = q.checks[i];
    bool any = false;
    for (std::size_t k = 0; k < n && !any; ++k) any = applies(c, item_fields(entries[k]));
    if (any) continue;
    const char* need = c == QualityCheck::json          ? "response_format {\"type\": \"json_object\"}"
                       : c == QualityCheck::json_schema ? "response_format {\"type\": \"json_schema\"}"
                       : c == QualityCheck::tool_calls  ? "tools"
                                                        : "expect";
    return invalid(fmt::format("/quality/checks/{}", i),
                   fmt::format("the {} check needs items with {}, and the dataset's {} items asked have none",
                               to_string(c), need, n));
  }
  if (judge) {
    bool any = false;
    for (std::size_t k = 0; k < n && !any; ++k) any = !judge_reference(entries[k]).empty();
    if (!any)
      return invalid("/judge", "a judge needs items with a reference answer (expect.answer or expect.contains)");
  }
  return std::nullopt;
}

JudgedQuality judge_quality(const QualitySettings& q, Role role, int pass,
                            const std::vector<llm::DatasetEntry>& entries,
                            const std::vector<loadgen::QualityReply>& replies,
                            const std::vector<std::optional<double>>& scores) {
  JudgedQuality out;
  json checks = json::object();
  for (QualityCheck c : q.checks) {
    if (c != QualityCheck::determinism) checks[std::string(to_string(c))] = {{"n", 0}, {"ok", 0}};
  }
  json answers = json::array(), score_list = json::array();
  const std::size_t n = std::min(replies.size(), entries.size());
  for (std::size_t i = 0; i < n; ++i) {
    const loadgen::QualityReply& reply = replies[i];
    const json fields = item_fields(entries[i]);
    const llm::Answer a = llm::assemble_answer(reply.events);
    const bool ok_transport =
        reply.asked && (reply.record.outcome == Outcome::ok || reply.record.outcome == Outcome::empty_stream);
    const bool answered = ok_transport && a.error.empty() && !a.malformed;
    answered ? ++out.answered : ++out.failed;
    store::QualityItemRow row;
    row.item = static_cast<int>(i);
    row.entry = i;
    row.outcome = !reply.asked   ? "not_asked"
                  : answered     ? "ok"
                  : ok_transport ? "stream_error"
                                 : std::string(to_string(reply.record.outcome));
    row.finish_reason = printable_ascii(a.finish_reason, 40);
    row.completion_tokens = a.completion_tokens;
    row.max_tokens = llm::quality_max_tokens(entries[i], q.max_tokens);
    row.answer = cut_utf8(a.text, kStoredAnswerBytes);
    row.tool_calls = tool_calls_json(a);
    if (i < scores.size()) row.score = scores[i];
    for (QualityCheck c : q.checks) {
      if (c == QualityCheck::determinism || !applies(c, fields)) continue;
      const std::string name(to_string(c));
      const QualityVerdict v =
          answered ? judge_one(c, fields, a, row.max_tokens)
                   : QualityVerdict{false, a.error.empty() ? "no answer (" + row.outcome + ")" : "error: " + a.error};
      row.verdicts[name] = {{"ok", v.ok}, {"reason", v.reason}};
      checks[name]["n"] = checks[name]["n"].get<std::uint64_t>() + 1;
      if (v.ok) checks[name]["ok"] = checks[name]["ok"].get<std::uint64_t>() + 1;
    }
    answers.push_back(answered ? answer_hash(a) : std::string());
    score_list.push_back(row.score ? json(*row.score) : json(nullptr));
    out.items.push_back(std::move(row));
  }
  out.summary = {{"role", to_string(role)},
                 {"pass", pass},
                 {"items", n},
                 {"answered", out.answered},
                 {"errors", out.failed},
                 {"checks", std::move(checks)},
                 {"answers", std::move(answers)},
                 {"scores", std::move(score_list)}};
  return out;
}

std::string judge_reference(const llm::DatasetEntry& e) {
  const json expect = item_fields(e).value("expect", json::object());
  if (!expect.is_object()) return {};
  for (const char* k : {"answer", "contains"}) {
    if (auto it = expect.find(k); it != expect.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

std::string judge_prompt(const std::string& template_text, const llm::DatasetEntry& e, const std::string& answer) {
  return judge_prompt(template_text, e.prompt, judge_reference(e), answer);
}

std::string judge_prompt(const std::string& template_text, const std::string& question, const std::string& reference,
                         const std::string& answer) {
  std::string out;
  out.reserve(template_text.size() + answer.size() + question.size() + reference.size());
  for (std::size_t i = 0; i < template_text.size();) {
    auto take = [&](std::string_view name, const std::string& value) {
      if (template_text.compare(i, name.size(), name) != 0) return false;
      out += value;
      i += name.size();
      return true;
    };
    if (take("{question}", question) || take("{reference}", reference) || take("{answer}", answer)) continue;
    out += template_text[i++];
  }
  return out;
}

store::StepRow quality_step_row(const StepOrder& order, int index, const JudgedQuality& judged,
                                const std::vector<std::optional<double>>& calibration_scores) {
  using json = nlohmann::json;
  StepOutcome o;
  o.kind = StepKind::quality;
  o.role = order.role;
  o.round = order.round;
  o.verdict = judged.failed == 0 ? Verdict::pass : Verdict::fail;
  o.completed = judged.answered;
  o.measured = judged.answered + judged.failed;
  store::StepRow step;
  step.index = index;
  step.kind = "quality";
  step.phase = order.phase;
  step.verdict = std::string(to_string(o.verdict));
  step.summary = judged.summary;
  if (!calibration_scores.empty()) {
    json& list = step.summary["calibration_scores"] = json::array();
    for (const auto& s : calibration_scores) list.push_back(s ? json(*s) : json(nullptr));
  }
  step.evaluation = {{"verdict", step.verdict},
                     {"note", "pass: every item was answered; the quality verdicts are in the job's result"}};
  step.outcome = o.to_json();
  if (order.role) step.role = std::string(to_string(*order.role));
  step.round = order.round;
  return step;
}

}  // namespace capsweep::sweep

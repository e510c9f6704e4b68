// The blocks of a regression job's spec: "regression" (the timed runs and their gate),
// "quality" (checks of the answers on a dataset) and "judge" (a scoring model).

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/fields.hpp"
#include "core/text.hpp"
#include "llm/dataset.hpp"
#include "sweep/spec.hpp"

namespace capsweep::sweep {

namespace {

using json = nlohmann::json;

constexpr std::array<std::pair<QualityCheck, std::string_view>, 6> kChecks{{
    {QualityCheck::json, "json"},
    {QualityCheck::json_schema, "json_schema"},
    {QualityCheck::tool_calls, "tool_calls"},
    {QualityCheck::max_length, "max_length"},
    {QualityCheck::determinism, "determinism"},
    {QualityCheck::accuracy, "accuracy"},
}};

std::optional<Error> parse_thresholds(const json& j, RegressionSettings& r) {
  const std::string f = "/regression/thresholds";
  r.metrics.clear();
  const json given = j.is_null() ? json::object() : j;
  if (!given.is_object()) return invalid(f, "must be an object of percentages");
  for (const auto& item : given.items()) {
    const std::string& key = item.key();
    const json& value = item.value();
    const auto& cat = gate_metric_catalogue();
    if (std::none_of(cat.begin(), cat.end(), [&](const GateMetric& m) { return m.threshold == key; })) {
      std::string names;
      for (const auto& m : cat) names += (names.empty() ? "" : ", ") + m.threshold;
      return invalid(f + "/" + printable_ascii(key, 64), "unknown threshold (expected one of " + names + ")");
    }
    if (!value.is_number() || !(value.get<double>() > 0 && value.get<double>() <= 1000)) {
      return invalid(f + "/" + key, "must be a percentage in (0, 1000]");
    }
  }
  // The defaults apply unless the spec sets them; optional metrics only when named.
  for (std::size_t i = 0; i < gate_metric_catalogue().size(); ++i) {
    GateMetric m = gate_metric_catalogue()[i];
    const bool by_default = i < 3;
    if (auto it = given.find(m.threshold); it != given.end()) {
      m.threshold_pct = it->get<double>();
    } else if (!by_default) {
      continue;
    }
    r.metrics.push_back(std::move(m));
  }
  return std::nullopt;
}

// `trace`: the runs replay a trace, which offers its own rate when neither is given.
Result<RegressionSettings> parse_regression(const json& j, bool trace) {
  const std::string f = "/regression";
  RegressionSettings r;
  if (!j.is_object()) return invalid(f, "is required for a regression job: {\"rate_rps\" or \"from_sweep\", ...}");
  // Both appear in a stored spec: the service writes from_sweep's rate into rate_rps at submit.
  const bool has_rate = j.contains("rate_rps"), has_sweep = j.contains("from_sweep");
  if (!has_rate && !has_sweep && trace) r.rate_rps = 0;  // the trace's own, at arrival.speed
  if (!has_rate && !has_sweep && !trace) {
    return invalid(f + "/rate_rps", "give the request rate (rate_rps) or a sweep to take it from (from_sweep)");
  }
  if (has_sweep) {
    const json& s = j.at("from_sweep");
    if (!s.is_string() || s.get_ref<const std::string&>().rfind("sw-", 0) != 0 ||
        s.get_ref<const std::string&>().size() > 64) {
      return invalid(f + "/from_sweep", "must be the id of a succeeded sweep (\"sw-...\")");
    }
    r.from_sweep = s.get<std::string>();
  }
  fields::Reader rd(j, f);
  if (has_rate) rd.positive("rate_rps", r.rate_rps);
  rd.seconds("duration_s", r.duration)
      .seconds("warmup_s", r.warmup, true)
      .seconds("cooldown_s", r.cooldown, true)
      .integer("rounds", r.rounds, 2, 50)
      .integer("max_rounds", r.max_rounds, 2, 50)
      .integer("max_concurrency", r.max_concurrency, 0, 100'000)
      .seconds("drain_timeout_s", r.drain_timeout);
  if (rd.error()) return *rd.error();
  if (j.contains("max_rounds") && r.max_rounds < r.rounds) {
    return invalid(f + "/max_rounds", fmt::format("must be at least rounds ({}): the rounds run first", r.rounds));
  }
  auto alpha = fields::number_in(j, "alpha", f, r.alpha, 1e-6, 0.5);
  if (!alpha) return alpha.error();
  r.alpha = *alpha;
  if (auto o = j.find("order"); o != j.end()) {
    if (*o == "alternate")
      r.order = RunOrder::alternate;
    else if (*o == "shuffled")
      r.order = RunOrder::shuffled;
    else
      return invalid(f + "/order", "must be \"alternate\" or \"shuffled\"");
  }
  if (auto e = parse_thresholds(j.value("thresholds", json()), r)) return *e;
  return r;
}

Result<QualitySettings> parse_quality(const json& j) {
  const std::string f = "/quality";
  QualitySettings q;
  if (!j.is_object()) return invalid(f, "must be an object");
  const json& d = j.value("dataset", json());
  if (d.is_string()) {
    if (!llm::is_dataset_id(d.get_ref<const std::string&>())) {
      return invalid(f + "/dataset", "must be a dataset id (\"ds-\" and 16 hex digits) from POST /v1/datasets");
    }
    q.dataset.id = d.get<std::string>();
  } else if (d.is_object()) {
    const json& id = d.value("id", json());
    if (!id.is_string() || !llm::is_dataset_id(id.get_ref<const std::string&>())) {
      return invalid(f + "/dataset/id", "must be a dataset id (\"ds-\" and 16 hex digits)");
    }
    q.dataset.id = id.get<std::string>();
    const json& sha = d.value("sha256", json(""));
    if (!sha.is_string() || (!sha.get_ref<const std::string&>().empty() &&
                             llm::dataset_id(sha.get_ref<const std::string&>()) != q.dataset.id)) {
      return invalid(f + "/dataset/sha256", "does not match the id");
    }
    q.dataset.sha256 = sha.get<std::string>();
  } else {
    return invalid(f + "/dataset", "is required: the stored dataset whose items are asked");
  }
  const json& checks = j.value("checks", json());
  if (!checks.is_array() || checks.empty()) {
    return invalid(f + "/checks",
                   "must list the checks: json, json_schema, tool_calls, max_length, determinism, accuracy");
  }
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const std::string fi = fmt::format("{}/checks/{}", f, i);
    auto c = checks[i].is_string() ? parse_quality_check(checks[i].get_ref<const std::string&>()) : std::nullopt;
    if (!c) return invalid(fi, "must be json, json_schema, tool_calls, max_length, determinism or accuracy");
    if (q.has(*c)) return invalid(fi, "appears twice");
    q.checks.push_back(*c);
  }
  fields::Reader rd(j, f);
  rd.integer("concurrency", q.concurrency, 1, 256)
      .integer("max_tokens", q.max_tokens, 1, 32'768)
      .integer("max_items", q.max_items, 0, 100'000);
  if (rd.error()) return *rd.error();
  auto drop = fields::number_in(j, "max_drop_pp", f, q.max_drop_pp, 0, 100);
  if (!drop) return drop.error();
  q.max_drop_pp = *drop;
  if (j.contains("max_accuracy_drop_pp")) {
    auto acc = fields::number_in(j, "max_accuracy_drop_pp", f, std::nullopt, 0, 100);
    if (!acc) return acc.error();
    q.max_accuracy_drop_pp = *acc;
  }
  return q;
}

// judge.calibration: {"items": [{"question", "reference", "answer", "human_score"}], "min_agreement"}.
Result<JudgeCalibration> parse_calibration(const json& c, std::uint32_t scale) {
  const std::string f = "/judge/calibration";
  if (!c.is_object()) return invalid(f, "must be an object {\"items\", \"min_agreement\"}");
  JudgeCalibration out;
  const json& items = c.value("items", json());
  if (!items.is_array() || items.size() < kMinCalibrationItems || items.size() > kMaxCalibrationItems) {
    return invalid(f + "/items", fmt::format("must be an array of {} to {} human-labelled answers",
                                             kMinCalibrationItems, kMaxCalibrationItems));
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string fi = fmt::format("{}/items/{}", f, i);
    const json& it = items[i];
    if (!it.is_object())
      return invalid(fi, "must be an object {\"question\", \"reference\", \"answer\", \"human_score\"}");
    JudgeLabel l;
    for (auto [key, dest] : {std::pair{"question", &l.question}, {"reference", &l.reference}, {"answer", &l.answer}}) {
      const json& v = it.value(key, json());
      if (!v.is_string()) return invalid(fi + "/" + key, "must be a string");
      *dest = v.get<std::string>();
    }
    const json& h = it.value("human_score", json());
    if (!h.is_number() || !(h.get<double>() >= 1 && h.get<double>() <= scale)) {
      return invalid(fi + "/human_score", fmt::format("must be a number on the judge's scale, 1 to {}", scale));
    }
    l.human_score = h.get<double>();
    out.items.push_back(std::move(l));
  }
  auto m = fields::number_in(c, "min_agreement", f, out.min_agreement, -1, 1);
  if (!m) return m.error();
  out.min_agreement = *m;
  return out;
}

Result<JudgeSettings> parse_judge(const json& j) {
  const std::string f = "/judge";
  JudgeSettings out;
  if (!j.is_object()) return invalid(f, "must be an object {\"target\", \"template\", \"scale\"}");
  if (!j.contains("target")) return invalid(f + "/target", "is required: the model that scores the answers");
  auto t = llm::parse_target(j.at("target"), f + "/target");
  if (!t) return t.error();
  if (!llm::api_row(t->api).quality) {
    return invalid(f + "/target/api", "the judge's answers are read as chat or completions answers");
  }
  out.target = std::move(*t);
  if (!out.target.replicas.empty())
    return invalid(f + "/target/base_urls", "the judge is one server: give its base_url");
  out.base_url = j.at("target").at("base_url").get<std::string>();
  const json& tpl = j.value("template", json());
  if (!tpl.is_string() || tpl.get_ref<const std::string&>().find("{answer}") == std::string::npos) {
    return invalid(f + "/template", "must be a prompt text with {answer} (and {reference}, {question}) in it");
  }
  out.template_text = tpl.get<std::string>();
  fields::Reader rd(j, f);
  rd.integer("scale", out.scale, 2, 100);
  if (rd.error()) return *rd.error();
  auto drop = fields::number_in(j, "max_drop_pct", f, out.max_drop_pct, 0, 100);
  if (!drop) return drop.error();
  out.max_drop_pct = *drop;
  if (auto c = j.find("calibration"); c != j.end()) {
    auto cal = parse_calibration(*c, out.scale);
    if (!cal) return cal.error();
    out.calibration = std::move(*cal);
  }
  return out;
}

}  // namespace

std::string_view to_string(Role r) noexcept {
  return r == Role::baseline ? "baseline" : "candidate";
}

std::optional<Role> parse_role(std::string_view s) noexcept {
  if (s == "baseline") return Role::baseline;
  if (s == "candidate") return Role::candidate;
  return std::nullopt;
}

const std::vector<GateMetric>& gate_metric_catalogue() {
  static const std::vector<GateMetric> all{
      {"request_goodput", "goodput_drop_pct", Worse::lower, 5, "goodput_attainment_pct", false},
      {"p95_ttft_ms", "ttft_p95_rise_pct", Worse::higher, 10, "", false},
      {"p95_itl_ms", "itl_p95_rise_pct", Worse::higher, 10, "", false},
      {"p95_tpot_ms", "tpot_p95_rise_pct", Worse::higher, 10, "", false},
      {"p95_e2el_ms", "e2el_p95_rise_pct", Worse::higher, 10, "", false},
      {"output_throughput", "output_throughput_drop_pct", Worse::lower, 5, "", true},
  };
  return all;
}

std::string_view to_string(QualityCheck c) noexcept {
  for (const auto& [check, name] : kChecks) {
    if (check == c) return name;
  }
  return "json";
}

std::optional<QualityCheck> parse_quality_check(std::string_view s) noexcept {
  for (const auto& [check, name] : kChecks) {
    if (name == s) return check;
  }
  return std::nullopt;
}

bool QualitySettings::has(QualityCheck c) const noexcept {
  return std::find(checks.begin(), checks.end(), c) != checks.end();
}

std::optional<Error> parse_regression_blocks(const json& spec, JobSpec& js) {
  auto r = parse_regression(spec.value("regression", json()), js.arrival.process == ArrivalProcess::trace);
  if (!r) return r.error();
  js.regression = std::move(*r);
  if (auto q = spec.find("quality"); q != spec.end()) {
    auto parsed = parse_quality(*q);
    if (!parsed) return parsed.error();
    js.quality = std::move(*parsed);
    const bool tools = js.quality->has(QualityCheck::tool_calls);
    for (const auto* t : {&js.target, &js.candidate->target}) {
      const std::string field = t == &js.target ? "/baseline/target/api" : "/candidate/target/api";
      const auto& row = llm::api_row(t->api);
      if (!row.quality) {
        return invalid(field, fmt::format("the quality checks read chat or completions answers, not {}'s; "
                                          "drop the \"quality\" block or use one of those APIs",
                                          row.name));
      }
      if (tools && !row.messages) return invalid(field, "the tool_calls check needs the chat API (\"api\": \"chat\")");
    }
  }
  if (auto j = spec.find("judge"); j != spec.end()) {
    if (!js.quality) return invalid("/judge", "scores the answers of the quality items: give a \"quality\" block too");
    auto parsed = parse_judge(*j);
    if (!parsed) return parsed.error();
    js.judge = std::move(*parsed);
  }
  return std::nullopt;
}

}  // namespace capsweep::sweep

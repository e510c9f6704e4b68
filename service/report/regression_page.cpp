#include "report/regression_page.hpp"

#include <fmt/format.h>

#include <map>
#include <vector>

#include "report/html.hpp"
#include "report/html_text.hpp"

namespace capsweep::report::detail {

namespace {

std::string pct(const json& v) {
  return v.is_number() ? fmt::format("{:+.1f}%", v.get<double>()) : std::string("-");
}

std::string runs(const json& values) {
  std::string out;
  for (const auto& v : values) out += (out.empty() ? "" : " &middot; ") + num(v, "{:.4g}");
  return out.empty() ? "-" : out;
}

std::string metrics_table(const json& r) {
  std::string h =
      "<h2>Performance</h2><table id=\"regression-metrics\"><tr><th class=\"l\">metric</th><th class=\"l\">baseline "
      "runs</th><th class=\"l\">candidate runs</th><th>change</th><th>interval</th><th>threshold</th><th>p</th><th "
      "class=\"l\">test</th><th>run-to-run spread</th><th class=\"l\">verdict</th></tr>";
  for (const auto& [key, m] : at(r, "metrics").items()) {
    const json& ci = at(m, "ci_pct");
    h += fmt::format(
        "<tr class=\"{}\"><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>"
        "<td>{}{}%</td><td>{}</td><td class=\"l\">{}</td><td>{}%{}</td><td class=\"l v\">{}</td></tr>",
        esc(text(m, "verdict")), esc(key), runs(at(m, "baseline_runs")), runs(at(m, "candidate_runs")),
        pct(at(m, "change_pct")),
        ci.is_array() && ci.size() == 2 ? fmt::format("[{}, {}]", pct(ci[0]), pct(ci[1])) : std::string("-"),
        text(m, "worse") == "lower" ? "-" : "+", num(at(m, "threshold_pct"), "{:g}"), num(at(m, "p_value"), "{:.2g}"),
        esc(text(m, "test")), num(at(m, "spread_pct")), at(m, "a_to_a_exceeds_threshold") == true ? " (too noisy)" : "",
        esc(text(m, "verdict")));
  }
  return h + "</table>\n";
}

std::string quality_table(const json& r) {
  const json& q = at(r, "quality");
  if (!q.is_object() || q.empty()) return {};
  std::string h =
      "<h2>Quality</h2><table id=\"regression-quality\"><tr><th class=\"l\">check</th><th>baseline</th>"
      "<th>candidate</th><th>items</th><th>drop</th><th>p (Fisher)</th><th class=\"l\">verdict</th><th "
      "class=\"l\">notes</th></tr>";
  auto rate = [](const json& v) { return v.is_number() ? fmt::format("{:.1f}%", 100 * v.get<double>()) : "-"; };
  for (const auto& [check, c] : q.items()) {
    std::string note = text(c, "note", "");
    if (at(c, "cross_match_rate").is_number()) {
      note = fmt::format("baseline and candidate alike: {}", rate(c["cross_match_rate"]));
    }
    h += fmt::format(
        "<tr class=\"{}\"><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} pp</td><td>{}</td><td "
        "class=\"l v\">{}</td><td class=\"l\">{}</td></tr>",
        esc(text(c, "verdict")), esc(check), rate(at(c, "baseline_rate")), rate(at(c, "candidate_rate")),
        esc(text(c, "n")), num(at(c, "drop_pp")), num(at(c, "p_value"), "{:.2g}"), esc(text(c, "verdict")), esc(note));
  }
  h += "</table>\n";
  if (const json& j = at(r, "judge"); j.is_object()) {
    const json& cal = at(j, "calibration");
    const json& ci = at(cal, "ci");
    const std::string gating =
        at(j, "gates") == true
            ? fmt::format(
                  "It gates the verdict: calibrated against {} human-labelled answers, Spearman {} (interval "
                  "{} to {}, at least {} asked).",
                  esc(text(cal, "scored")), num(at(cal, "spearman"), "{:.3f}"),
                  num(capsweep::json_item(ci, 0), "{:.3f}"), num(capsweep::json_item(ci, 1), "{:.3f}"),
                  num(at(cal, "min_agreement"), "{:g}"))
            : "Advisory, it gates nothing: " + esc(text(cal, "note"));
    h += fmt::format(
        "<p id=\"judge\">Judge: mean score {} (baseline) vs {} (candidate) on a scale of {}, change {}: <b>{}</b>. "
        "{}</p>\n",
        num(at(j, "baseline_mean"), "{:.2f}"), num(at(j, "candidate_mean"), "{:.2f}"), esc(text(j, "scale")),
        pct(at(j, "change_pct")), esc(text(j, "verdict")), gating);
  }
  return h;
}

// The timed runs: each round's two runs side by side.
std::string rounds_table(const json& r, const json& steps) {
  std::map<int, std::map<std::string, const json*>> by_round;
  for (const auto& s : steps) {
    if (text(s, "kind") != "run" || !at(s, "round").is_number()) continue;
    by_round[s["round"].get<int>()][text(s, "role")] = &s;
  }
  std::vector<std::string> keys;
  for (const auto& [key, m] : at(r, "metrics").items()) keys.push_back(key);
  std::string h = "<h2>Rounds</h2><table id=\"regression-rounds\"><tr><th>round</th><th class=\"l\">order</th>";
  for (const auto& k : keys) h += fmt::format("<th>{} A</th><th>{} B</th>", esc(k), esc(k));
  h += "<th>requests A / B</th></tr>";
  for (const auto& [round, sides] : by_round) {
    const json* a = sides.count("baseline") ? sides.at("baseline") : nullptr;
    const json* b = sides.count("candidate") ? sides.at("candidate") : nullptr;
    std::string order = a && b ? (at(*a, "index").get<int>() < at(*b, "index").get<int>() ? "A, B" : "B, A") : "-";
    h += fmt::format("<tr><td>{}</td><td class=\"l\">{}</td>", round + 1, order);
    for (const auto& k : keys) {
      h += fmt::format("<td>{}</td><td>{}</td>", a ? num(at(at(*a, "summary"), k.c_str()), "{:.4g}") : "-",
                       b ? num(at(at(*b, "summary"), k.c_str()), "{:.4g}") : "-");
    }
    h += fmt::format("<td>{} / {}</td></tr>", a ? text(at(*a, "summary"), "measured") : "-",
                     b ? text(at(*b, "summary"), "measured") : "-");
  }
  return h + "</table>\n";
}

// One chart per gated metric: both sides across the rounds.
std::string round_charts(const json& r) {
  std::string h = "<h2>Both sides round by round</h2><div class=\"charts\">";
  for (const auto& [key, m] : at(r, "metrics").items()) {
    Chart c;
    c.title = key + " by round";
    c.x_label = "round";
    c.y_label = key;
    Series a{"baseline (A)", "#0969da", {}}, b{"candidate (B)", "#cf222e", {}};
    double x = 1;
    for (const auto& v : at(m, "baseline_runs"))
      if (v.is_number()) a.points.emplace_back(x++, v.get<double>());
    x = 1;
    for (const auto& v : at(m, "candidate_runs"))
      if (v.is_number()) b.points.emplace_back(x++, v.get<double>());
    c.series = {a, b};
    h += "<div class=\"chart\">" + render_chart(c) + "</div>";
  }
  return h + "</div>\n";
}

}  // namespace

std::string regression_sections(const json& sweep, const json& steps) {
  const json& r = at(sweep, "result");
  if (!r.is_object()) return {};
  return metrics_table(r) + quality_table(r) + rounds_table(r, steps) + round_charts(r);
}

}  // namespace capsweep::report::detail

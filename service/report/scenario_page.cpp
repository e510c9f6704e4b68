#include "report/scenario_page.hpp"

#include <fmt/format.h>

#include <vector>

#include "report/html.hpp"
#include "report/html_text.hpp"

namespace capsweep::report::detail {

namespace {

// A check's measured value or bound as the table shows it.
std::string figure(const json& v) {
  if (v.is_number()) return num(v, "{:.4g}");
  if (!v.is_object()) return "-";
  std::string out;
  for (const auto& [k, x] : v.items()) {
    if (x.is_number()) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", esc(k), num(x, "{:.4g}"));
    if (x.is_string()) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", esc(k), esc(x.get<std::string>()));
  }
  return out.empty() ? "-" : out;
}

std::string checks_table(const json& r) {
  std::string h =
      "<div><h2>Checks</h2><table id=\"scenario-checks\"><tr><th class=\"l\">check</th><th class=\"l\">verdict</th>"
      "<th class=\"l\">measured</th><th class=\"l\">bound</th><th>windows</th><th class=\"l\">detail</th></tr>";
  for (const auto& [name, c] : at(r, "checks").items()) {
    std::string measured = figure(at(c, "measured"));
    if (name == "metric_choice" && at(at(c, "measured"), "ranking").is_array()) {
      measured.clear();
      for (const auto& g : at(at(c, "measured"), "ranking"))
        if (g.is_string()) measured += (measured.empty() ? "" : " &gt; ") + esc(g.get<std::string>());
    }
    const json& w = at(c, "windows");
    const std::string windows = w.is_array() && w.size() == 2 && w[0].is_number()
                                    ? fmt::format("{}&ndash;{}", num(w[0], "{:g}"), num(w[1], "{:g}"))
                                    : std::string("-");
    h += fmt::format(
        "<tr class=\"{}\"><td class=\"l\">{}</td><td class=\"l v\">{}</td><td class=\"l\">{} {}</td>"
        "<td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}</td></tr>",
        esc(text(c, "verdict")), esc(name), esc(text(c, "verdict")), measured, esc(text(c, "unit", "")),
        figure(at(c, "bound")), windows, esc(text(c, "detail", "")));
  }
  return h + "</table></div>\n";
}

// The events worth a line on every chart: the spike, readiness flips, replica changes.
std::vector<Marker> event_lines(const json& events) {
  std::vector<Marker> out;
  for (const auto& e : events) {
    if (!at(e, "t_s").is_number()) continue;
    const double t = e["t_s"].get<double>();
    const std::string kind = text(e, "kind");
    if (kind == "spike") {
      out.push_back({"spike", t, "#cf222e"});
    } else if (kind == "readiness") {
      out.push_back({at(e, "ready") == true ? "ready" : "not ready", t, "#1a7f37"});
    } else if (kind == "replicas" && text(e, "which") == "ready") {
      const bool down =
          at(e, "to").is_number() && at(e, "from").is_number() && e["to"].get<double>() < e["from"].get<double>();
      out.push_back({fmt::format("ready {}→{}", num(at(e, "from"), "{:g}"), num(at(e, "to"), "{:g}")), t,
                     down ? "#8250df" : "#0969da"});
    }
  }
  return out;
}

}  // namespace

std::string scenario_sections(const json& sweep, const json& windows) {
  const json& r = at(sweep, "result");
  const json& cond = at(r, "conditions");
  const double width = at(cond, "window_s").is_number() ? cond["window_s"].get<double>() : 5;
  const std::vector<Marker> events = event_lines(at(r, "events"));
  Chart rate{"Offered and achieved rate", "time (s)", "requests per second", {}, {}, events, false};
  Chart ttft{"TTFT p95 of the requests scheduled in each window", "time (s)", "TTFT (ms)", {}, {}, events, false};
  Chart replicas{"Replicas", "time (s)", "replicas", {}, {}, events, false};
  Series offered{"offered", "#57606a", {}}, achieved{"completed", "#1a7f37", {}}, p95{"p95", "#bf8700", {}};
  Series ready{"ready", "#0969da", {}}, desired{"desired", "#8250df", {}};
  for (const auto& w : windows) {
    if (!at(w, "t_start_s").is_number()) continue;
    const double x = w["t_start_s"].get<double>() + width / 2;
    if (at(w, "offered_rps").is_number()) offered.points.emplace_back(x, w["offered_rps"].get<double>());
    if (at(w, "completed").is_number()) achieved.points.emplace_back(x, w["completed"].get<double>() / width);
    if (at(w, "p95_ttft_ms").is_number()) p95.points.emplace_back(x, w["p95_ttft_ms"].get<double>());
    // Counts are read at each window's end.
    if (at(w, "ready").is_number()) ready.points.emplace_back(x + width / 2, w["ready"].get<double>());
    if (at(w, "desired").is_number()) desired.points.emplace_back(x + width / 2, w["desired"].get<double>());
  }
  rate.series = {std::move(offered), std::move(achieved)};
  ttft.series = {std::move(p95)};
  const json& bound = at(at(at(at(sweep, "spec"), "slo"), "ttft_ms"), "p95");
  if (bound.is_number())
    ttft.hlines.push_back({fmt::format("SLO p95 {:g} ms", bound.get<double>()), bound.get<double>(), "#cf222e"});
  std::string h = "<div class=\"charts\" id=\"scenario-timeline\"><div><h2>Timeline</h2><div class=\"charts\">";
  h += render_chart(rate);
  h += render_chart(ttft);
  if (!ready.points.empty() || !desired.points.empty()) {
    replicas.series = {std::move(ready), std::move(desired)};
    h += render_chart(replicas);
  }
  h += "</div></div>\n";
  h += checks_table(r);
  const json& s = at(r, "summary");
  h += fmt::format(
      "</div><p class=\"muted\">{} windows of {:g} s; {} requests scheduled, {} completed, {} failed ({} fast "
      "rejections); pooled TTFT p95 {} ms.</p>\n",
      windows.size(), width, text(s, "scheduled"), text(s, "completed"), text(s, "failed"), text(s, "rejected"),
      num(at(s, "pooled_p95_ttft_ms"), "{:.0f}"));
  return h;
}

}  // namespace capsweep::report::detail

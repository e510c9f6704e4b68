#include "report/html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/json_access.hpp"
#include "core/slo.hpp"

namespace capsweep::report {

namespace {

using json = nlohmann::json;

const json& at(const json& j, const char* key) {
  return json_at(j, key);
}

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string text(const json& j, const char* key, const std::string& fallback = "-") {
  const json& v = at(j, key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return fmt::format("{:g}", v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return fallback;
}

std::string num(const json& v, const char* f = "{:.1f}") {
  return v.is_number() && std::isfinite(v.get<double>()) ? fmt::format(fmt::runtime(f), v.get<double>())
                                                         : std::string("-");
}

std::string tick_label(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 10000 || a < 0.01) return fmt::format("{:.0e}", v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", std::round(v * 1000) / 1000);
}

constexpr double kW = 640, kH = 360, kLeft = 70, kRight = 20, kTop = 40, kBottom = 60;

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) return {lo};
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  // The 1-2-5 step nearest the raw step (in ratio).
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (std::fabs(std::log(m * mag / raw)) < std::fabs(std::log(step / raw))) step = m * mag;
  }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return out;
}

std::string render_chart(const Chart& c) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  auto take_y = [&](double y) {
    if (!std::isfinite(y) || (c.log_y && y <= 0)) return;
    y0 = std::min(y0, y);
    y1 = std::max(y1, y);
  };
  for (const auto& s : c.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      take_y(y);
    }
  }
  for (const auto& m : c.hlines) take_y(m.value);
  for (const auto& m : c.vlines) {
    if (std::isfinite(m.value)) x0 = std::min(x0, m.value), x1 = std::max(x1, m.value);
  }
  std::string svg = fmt::format(
      R"(<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}">)",
      kW, kH, kW, kH, esc(c.title));
  svg += fmt::format(R"(<text x="{}" y="22" class="title">{}</text>)", kLeft, esc(c.title));
  if (!(x1 >= x0) || !(y1 >= y0)) {
    svg += fmt::format(R"(<text x="{}" y="{}" class="empty">no data</text></svg>)", kW / 2 - 30, kH / 2);
    return svg;
  }
  if (x1 == x0) x0 -= 1, x1 += 1;
  x0 = std::min(x0, 0.0);
  std::vector<double> yticks;
  if (c.log_y) {
    const double lo = std::pow(10.0, std::floor(std::log10(y0))), hi = std::pow(10.0, std::ceil(std::log10(y1)));
    y0 = lo;
    y1 = hi > lo ? hi : lo * 10;
    for (double t = y0; t <= y1 * 1.0001; t *= 10) yticks.push_back(t);
  } else {
    y0 = std::min(y0, 0.0);
    if (y1 == y0) y1 = y0 + 1;
    y1 *= 1.05;
    yticks = nice_ticks(y0, y1);
  }
  const auto xticks = nice_ticks(x0, x1);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto sx = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto sy = [&](double y) {
    const double f = c.log_y ? (std::log10(std::max(y, y0)) - std::log10(y0)) / (std::log10(y1) - std::log10(y0))
                             : (y - y0) / (y1 - y0);
    return kTop + ph - std::clamp(f, 0.0, 1.0) * ph;
  };
  // Axes, grid and ticks.
  svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" class="plot"/>)", kLeft, kTop, pw, ph);
  for (double t : xticks) {
    svg += fmt::format(
        R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" class="grid"/><text x="{0:.1f}" y="{3}" class="tick" text-anchor="middle">{4}</text>)",
        sx(t), kTop, kTop + ph, kTop + ph + 16, tick_label(t));
  }
  for (double t : yticks) {
    svg += fmt::format(
        R"(<line x1="{1}" y1="{0:.1f}" x2="{2}" y2="{0:.1f}" class="grid"/><text x="{3}" y="{4:.1f}" class="tick" text-anchor="end">{5}</text>)",
        sy(t), kLeft, kLeft + pw, kLeft - 6, sy(t) + 4, tick_label(t));
  }
  svg += fmt::format(R"(<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>)", kLeft + pw / 2, kH - 28,
                     esc(c.x_label));
  svg += fmt::format(
      R"svg(<text x="16" y="{0}" class="axis" text-anchor="middle" transform="rotate(-90 16 {0})">{1}{2}</text>)svg",
      kTop + ph / 2, esc(c.y_label), c.log_y ? " (log)" : "");
  // Markers.
  // Horizontal markers are labelled at the left end, vertical ones stacked from the top, to
  // the left of their line when it lies in the right half, so labels do not collide.
  for (const auto& m : c.hlines) {
    if (!std::isfinite(m.value)) continue;
    svg += fmt::format(
        R"(<line x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}" stroke="{}" class="marker"/><text x="{}" y="{:.1f}" class="mlabel" fill="{}">{}</text>)",
        kLeft, sy(m.value), kLeft + pw, sy(m.value), m.color, kLeft + 4, sy(m.value) - 4, m.color, esc(m.label));
  }
  int stacked = 0;
  for (const auto& m : c.vlines) {
    if (!std::isfinite(m.value)) continue;
    const bool right_half = sx(m.value) > kLeft + pw / 2;
    svg += fmt::format(
        R"(<line x1="{0:.1f}" y1="{1}" x2="{0:.1f}" y2="{2}" stroke="{3}" class="marker"/><text x="{4:.1f}" y="{5}" class="mlabel" fill="{3}" text-anchor="{6}">{7}</text>)",
        sx(m.value), kTop, kTop + ph, m.color, sx(m.value) + (right_half ? -4 : 4), kTop + 24 + 14 * stacked,
        right_half ? "end" : "start", esc(m.label));
    ++stacked;
  }
  // Series and legend.
  double legend_x = kLeft;
  for (const auto& s : c.series) {
    auto pts = s.points;
    std::sort(pts.begin(), pts.end());
    std::string poly;
    std::string dots;
    for (const auto& [x, y] : pts) {
      if (!std::isfinite(x) || !std::isfinite(y) || (c.log_y && y <= 0)) continue;
      poly += fmt::format("{:.1f},{:.1f} ", sx(x), sy(y));
      dots += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="{}"><title>{}: {:g} at {:g}</title></circle>)",
                          sx(x), sy(y), s.color, esc(s.name), y, x);
    }
    svg += fmt::format(R"(<polyline points="{}" fill="none" stroke="{}" class="series"/>{})", poly, s.color, dots);
    svg += fmt::format(
        R"(<rect x="{:.1f}" y="{}" width="12" height="12" fill="{}" class="legend-key"/><text x="{:.1f}" y="{}" class="legend">{}</text>)",
        legend_x, kH - 16, s.color, legend_x + 16, kH - 6, esc(s.name));
    legend_x += 30 + 7.0 * static_cast<double>(s.name.size());
  }
  svg += "</svg>";
  return svg;
}

std::string render_report(const json& sweep, const json& steps) {
  const json& spec = at(sweep, "spec");
  const json& r = at(sweep, "result");
  const json& slo = at(spec, "slo");
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += fmt::format("<title>capsweep report {}</title>", esc(text(sweep, "id")));
  h += R"(<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1b1f24;max-width:1400px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
.verdict{font-size:18px;background:#f6f8fa;border-left:4px solid #2da44e;padding:10px 14px;margin:14px 0}
.verdict.none{border-left-color:#cf222e} .muted{color:#57606a}
table{border-collapse:collapse;font-size:13px} td,th{padding:4px 8px;border-bottom:1px solid #eaeef2;text-align:right}
th{background:#f6f8fa} td.l,th.l{text-align:left} tr.fail td{color:#a40e26} tr.pass td.v{color:#1a7f37}
.charts{display:flex;flex-wrap:wrap;gap:12px} .chart{border:1px solid #d0d7de;border-radius:6px;background:#fff}
.chart .title{font-size:14px;font-weight:600} .chart .tick{font-size:11px;fill:#57606a} .chart .axis{font-size:12px;fill:#1b1f24}
.chart .grid{stroke:#eaeef2} .chart .plot{fill:none;stroke:#8c959f} .chart .series{stroke-width:2}
.chart .marker{stroke-dasharray:6 4;stroke-width:1.5} .chart .mlabel{font-size:11px} .chart .legend{font-size:12px}
.warn{background:#fff8c5;border:1px solid #d4a72c;padding:6px 10px;margin:4px 0;border-radius:4px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:14px} dt{color:#57606a}
dd{margin:0;overflow-wrap:anywhere;font-family:ui-monospace,monospace;font-size:12px}
</style></head><body>
)";
  h += fmt::format(
      "<h1>{}</h1><div class=\"muted\">sweep {} &middot; {} &middot; created {} &middot; finished {}</div>\n",
      esc(text(sweep, "name", "capsweep sweep")), esc(text(sweep, "id")), esc(text(sweep, "status")),
      esc(text(sweep, "created_at")), esc(text(sweep, "finished_at")));

  // The verdict first.
  std::string verdict;
  bool have_rate = false;
  if (at(r, "kind") == "check") {
    verdict = fmt::format("Check verdict: <b>{}</b> at {} req/s", esc(text(r, "verdict")),
                          esc(text(at(r, "conditions"), "rate_rps")));
    have_rate = at(r, "verdict") == "pass";
  } else if (at(r, "max_slo_rate_rps").is_number()) {
    have_rate = true;
    verdict = fmt::format("Max <b>{} req/s</b> within the SLO", num(r["max_slo_rate_rps"]));
    if (at(r, "knee_rate_rps").is_number()) verdict += fmt::format("; knee at {} req/s", num(r["knee_rate_rps"]));
    if (at(r, "limiting_metric").is_string()) verdict += "; limited by " + esc(r["limiting_metric"].get<std::string>());
    if (at(r, "saturation_rate_rps").is_number())
      verdict += fmt::format("; saturation from {} req/s", num(r["saturation_rate_rps"]));
  } else if (r.is_object()) {
    verdict = "No rate met the SLO";
  } else {
    verdict = fmt::format("No result ({}){}", esc(text(sweep, "status")),
                          at(sweep, "error").is_string() ? ": " + esc(sweep["error"].get<std::string>()) : "");
  }
  h += fmt::format("<div class=\"verdict{}\" id=\"verdict\">{}</div>\n", have_rate ? "" : " none", verdict);

  // The spec in short.
  h += "<h2>Spec</h2><dl>";
  const json& target = at(spec, "target");
  h += fmt::format("<dt>target</dt><dd>{} ({}, model {})</dd>", esc(text(target, "base_url")), esc(text(target, "api")),
                   esc(text(target, "model")));
  const json& w = at(spec, "workload");
  h += fmt::format("<dt>workload</dt><dd>prompt {} &middot; output {} &middot; seed {}</dd>",
                   esc(at(w, "prompt_tokens").dump()), esc(at(w, "output_tokens").dump()), esc(text(w, "seed")));
  h += fmt::format("<dt>arrival</dt><dd>{}</dd>", esc(at(spec, "arrival").dump()));
  if (at(spec, "sweep").is_object()) h += fmt::format("<dt>sweep</dt><dd>{}</dd>", esc(spec["sweep"].dump()));
  if (at(spec, "check").is_object()) h += fmt::format("<dt>check</dt><dd>{}</dd>", esc(spec["check"].dump()));
  h += fmt::format("<dt>SLO</dt><dd>{}</dd></dl>\n", esc(describe_slo(slo)));

  // Charts from the fixed-rate steps, or in a concurrency sweep from its levels (x: users).
  const bool by_users = text(r, "mode") == "concurrency";
  const auto x_of = [by_users](const json& s) {
    return by_users ? at(at(s, "summary"), "users") : at(s, "offered_rate_rps");
  };
  const std::string x_name = by_users ? "users (closed loop)" : "offered rate (req/s)";
  const std::string against = by_users ? "against users" : "against offered rate";
  std::vector<const json*> fixed;
  for (const auto& s : steps) {
    if (x_of(s).is_number() && (!by_users || x_of(s).get<double>() > 0)) fixed.push_back(&s);
  }
  auto series = [&](const std::string& name, const std::string& color, const std::function<json(const json&)>& y) {
    Series out{name, color, {}};
    for (const json* s : fixed) {
      const json v = y(*s);
      if (v.is_number()) out.points.emplace_back(x_of(*s).get<double>(), v.get<double>());
    }
    return out;
  };
  auto summary_key = [](const char* key) { return [key](const json& s) { return at(at(s, "summary"), key); }; };
  std::vector<Marker> rate_markers;
  if (at(r, "knee_rate_rps").is_number()) rate_markers.push_back({"knee", r["knee_rate_rps"].get<double>(), "#8250df"});
  if (at(r, "max_slo_rate_rps").is_number())
    rate_markers.push_back({"max SLO rate", r["max_slo_rate_rps"].get<double>(), "#1a7f37"});
  if (at(r, "max_slo_concurrency").is_number())
    rate_markers.push_back({"max SLO users", r["max_slo_concurrency"].get<double>(), "#1a7f37"});
  auto bound = [&](const char* metric, const char* stat) -> std::vector<Marker> {
    const json& b = at(at(slo, metric), stat);
    if (!b.is_number()) return {};
    return {{fmt::format("SLO {} {} ms", stat, b.get<double>()), b.get<double>(), "#cf222e"}};
  };
  h += "<h2>Latency and throughput " + against + "</h2><div class=\"charts\">";
  Chart ttft{
      "TTFT " + against,
      x_name,
      "TTFT (ms)",
      {series("p50", "#0969da", summary_key("p50_ttft_ms")), series("p95", "#bf8700", summary_key("p95_ttft_ms")),
       series("p99", "#cf222e", summary_key("p99_ttft_ms"))},
      bound("ttft_ms", "p95"),
      rate_markers,
      false};
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& s : ttft.series) {
    for (const auto& [x, y] : s.points) {
      if (y > 0) lo = std::min(lo, y), hi = std::max(hi, y);
    }
  }
  ttft.log_y = hi > 0 && lo > 0 && hi / lo > 30;  // latency spans decades past the knee
  h += render_chart(ttft);
  h += render_chart(Chart{"ITL p95 " + against,
                          x_name,
                          "ITL p95 (ms)",
                          {series("ITL p95", "#bf8700", summary_key("p95_itl_ms")),
                           series("TPOT mean", "#0969da", summary_key("mean_tpot_ms"))},
                          bound("itl_ms", "p95"),
                          rate_markers,
                          false});
  Chart thr{
      "Achieved throughput and goodput",
      x_name,
      "req/s",
      {series("offered", "#8c959f", [by_users](const json& s) { return by_users ? json() : s["offered_rate_rps"]; }),
       series("completed", "#0969da", summary_key("request_throughput")),
       series("goodput", "#1a7f37", summary_key("request_goodput"))},
      {},
      rate_markers,
      false};
  h += render_chart(thr);
  auto server_key = [](const char* key) { return [key](const json& s) { return at(at(s, "server"), key); }; };
  Chart gauges{"Target's queue and KV cache (scraped)",
               x_name,
               "mean per step",
               {series("running", "#0969da", server_key("mean_running")),
                series("waiting", "#cf222e", server_key("mean_waiting")),
                series("KV cache %", "#8250df",
                       [](const json& s) {
                         const json& v = at(at(s, "server"), "mean_kv_cache_usage");
                         return v.is_number() ? json(100 * v.get<double>()) : json(nullptr);
                       })},
               {},
               rate_markers,
               false};
  bool scraped = false;
  for (const auto& s : gauges.series) scraped |= !s.points.empty();
  if (scraped) h += render_chart(gauges);
  h += "</div>\n";

  // Steps.
  h += "<h2>Steps</h2><table id=\"steps\"><tr><th>#</th><th class=\"l\">phase</th><th>offered req/s</th><th>completed "
       "req/s</th>"
       "<th>TTFT p50 ms</th><th>TTFT p95 ms</th><th>TTFT p99 ms</th><th>ITL p95 ms</th><th>TPOT ms</th><th>goodput "
       "req/s</th>"
       "<th>errors</th><th class=\"l\">verdict</th><th class=\"l\">notes</th></tr>";
  std::vector<std::string> warnings;
  for (const auto& s : steps) {
    const json& m = at(s, "summary");
    std::string notes;
    if (at(s, "generator_limited") == true) notes += "generator-limited ";
    if (at(at(at(s, "evaluation"), "saturation"), "saturated") == true) notes += "saturated ";
    if (at(s, "verdict") == "inconclusive" && at(s, "offered_rate_rps").is_number()) {
      warnings.push_back(fmt::format("step {} at {} req/s was inconclusive (re-run longer)", text(s, "index"),
                                     num(s["offered_rate_rps"], "{:.2f}")));
    }
    if (at(s, "generator_limited") == true)
      warnings.push_back(fmt::format("step {} was generator-limited", text(s, "index")));
    h += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td "
        "class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</"
        "td><td>{}</td><td class=\"l v\">{}</td><td class=\"l\">{}</td></tr>",
        esc(text(s, "verdict")), esc(text(s, "index")), esc(text(s, "phase")), num(at(s, "offered_rate_rps"), "{:.2f}"),
        num(at(m, "request_throughput"), "{:.2f}"), num(at(m, "p50_ttft_ms")), num(at(m, "p95_ttft_ms")),
        num(at(m, "p99_ttft_ms")), num(at(m, "p95_itl_ms")), num(at(m, "mean_tpot_ms")),
        num(at(m, "request_goodput"), "{:.2f}"), esc(text(m, "failed", "0")), esc(text(s, "verdict")), esc(notes));
  }
  h += "</table>\n";
  for (const auto& wv : at(r, "warnings")) {
    if (wv.is_string()) warnings.push_back(wv.get<std::string>());
  }
  h += "<h2>Warnings</h2>";
  if (warnings.empty()) h += "<p class=\"muted\">none</p>";
  for (const auto& wv : warnings) h += "<div class=\"warn\">" + esc(wv) + "</div>";
  h += "\n<p class=\"muted\">Generated by capsweep from the stored steps. Latencies are measured from each request's "
       "scheduled send time; see the README's metric definitions.</p>\n</body></html>\n";
  return h;
}

}  // namespace capsweep::report

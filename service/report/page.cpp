// The report page, section by section: head, verdict, spec (with the target's labels), the
// charts (against offered rate or users for a sweep; distributions and time for a check and
// for each closed-loop level), the step table and the warnings.

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "core/metrics.hpp"
#include "core/slo.hpp"
#include "report/html.hpp"
#include "report/html_text.hpp"
#include "report/percentiles.hpp"
#include "report/regression_page.hpp"
#include "report/scenario_page.hpp"

namespace capsweep::report {

namespace {

using namespace detail;

constexpr std::array<const char*, 8> kPalette{"#0969da", "#bf8700", "#cf222e", "#8250df",
                                              "#1a7f37", "#57606a", "#d4a72c", "#0550ae"};

const char* color(std::size_t i) {
  return kPalette[i % kPalette.size()];
}

constexpr const char* kStyle = R"(<style>
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

// What the page is about: a check (one step judged), a concurrency sweep, a rate sweep, or a
// regression (two sides compared).
enum class PageKind { rate_sweep, concurrency_sweep, check, regression, scenario };

PageKind page_kind(const json& sweep) {
  const json& r = at(sweep, "result");
  if (at(r, "kind") == "regression" || text(sweep, "kind") == "regression") return PageKind::regression;
  if (at(r, "kind") == "scenario" || text(sweep, "kind") == "scenario") return PageKind::scenario;
  if (at(r, "kind") == "check" || text(sweep, "kind") == "check") return PageKind::check;
  if (text(r, "mode") == "concurrency" || text(at(at(sweep, "spec"), "sweep"), "mode") == "concurrency")
    return PageKind::concurrency_sweep;
  return PageKind::rate_sweep;
}

std::string head_section(const json& sweep, PageKind kind) {
  const char* noun = kind == PageKind::check        ? "check"
                     : kind == PageKind::regression ? "regression"
                     : kind == PageKind::scenario   ? "scenario"
                                                    : "sweep";
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">";
  h += fmt::format("<title>capsweep {} report {}</title>", noun, esc(text(sweep, "id")));
  h += kStyle;
  h += fmt::format("<h1>{}</h1><div class=\"muted\">{} {} &middot; {} &middot; created {} &middot; finished {}</div>\n",
                   esc(text(sweep, "name", std::string("capsweep ") + noun)), noun, esc(text(sweep, "id")),
                   esc(text(sweep, "status")), esc(text(sweep, "created_at")), esc(text(sweep, "finished_at")));
  return h;
}

std::string verdict_section(const json& sweep) {
  const json& r = at(sweep, "result");
  std::string verdict;
  bool good = false;
  if (at(r, "kind") == "regression") {
    verdict = fmt::format("Regression verdict: <b>{}</b> for candidate {} against baseline {} at {} req/s",
                          esc(text(r, "verdict")), esc(text(at(r, "candidate"), "base_url")),
                          esc(text(at(r, "baseline"), "base_url")), esc(text(at(r, "conditions"), "rate_rps")));
    good = at(r, "verdict") == "pass";
  } else if (at(r, "kind") == "scenario") {
    const json& cond = at(r, "conditions");
    verdict =
        fmt::format("Scenario verdict: <b>{}</b> over {} s against {} (capacity {} req/s)", esc(text(r, "verdict")),
                    esc(text(cond, "duration_s")), esc(text(cond, "target")), esc(text(cond, "capacity_rps")));
    good = at(r, "verdict") == "pass";
  } else if (at(r, "kind") == "check") {
    const json& cond = at(r, "conditions");
    const json& offered = at(at(r, "observations"), "offered_rate_rps");
    std::string load = fmt::format("{} req/s", esc(text(cond, "rate_rps")));
    if (text(cond, "mode") == "concurrency") {
      load = fmt::format("{} users (closed loop)", esc(text(cond, "concurrency")));
    } else if (text(cond, "arrival") == "trace") {
      load = fmt::format("a trace replayed at {}x speed ({} req/s offered)", esc(text(at(cond, "trace"), "speed")),
                         num(offered, "{:.2f}"));
    } else if (cond.contains("sessions")) {
      load = fmt::format("{} sessions/s ({} req/s offered as their turns)", esc(text(cond, "rate_rps")),
                         num(at(at(cond, "sessions"), "offered_rate_rps"), "{:.2f}"));
    }
    verdict = fmt::format("Check verdict: <b>{}</b> at {}", esc(text(r, "verdict")), load);
    good = at(r, "verdict") == "pass";
  } else if (at(r, "max_slo_rate_rps").is_number()) {
    good = true;
    verdict = fmt::format("Max <b>{} req/s</b> within the SLO", num(r["max_slo_rate_rps"]));
    if (at(r, "knee_rate_rps").is_number()) verdict += fmt::format("; knee at {} req/s", num(r["knee_rate_rps"]));
    if (at(r, "limiting_metric").is_string()) verdict += "; limited by " + esc(r["limiting_metric"].get<std::string>());
    if (at(r, "saturation_rate_rps").is_number())
      verdict += fmt::format("; saturation from {} req/s", num(r["saturation_rate_rps"]));
  } else if (at(r, "max_slo_concurrency").is_number()) {
    good = true;
    verdict = fmt::format("At most <b>{} users</b> within the SLO", esc(text(r, "max_slo_concurrency")));
  } else if (r.is_object()) {
    verdict = text(r, "mode") == "concurrency" ? "No number of users met the SLO" : "No rate met the SLO";
  } else {
    verdict = fmt::format("No result ({}){}", esc(text(sweep, "status")),
                          at(sweep, "error").is_string() ? ": " + esc(sweep["error"].get<std::string>()) : "");
  }
  if (at(r, "mlperf_scenario").is_string()) {
    verdict += fmt::format(" <span class=\"muted\" id=\"mlperf\">(MLPerf {} scenario{})</span>",
                           esc(text(r, "mlperf_scenario")),
                           at(r, "mlperf_scenario") == "Offline" ? ": batch capacity, not interactive capacity" : "");
  }
  return fmt::format("<div class=\"verdict{}\" id=\"verdict\">{}</div>\n", good ? "" : " none", verdict);
}

// A target as the spec names it: its URL (its replicas' and their balance), API and model(s).
std::string target_text(const json& t) {
  std::string urls = text(t, "base_url"), models = text(t, "model");
  for (const auto& u : at(t, "base_urls"))
    urls += (urls.empty() ? "" : ", ") + (u.is_string() ? u.get<std::string>() : u.dump());
  const std::string balance = text(t, "balance");
  if (at(t, "base_urls").is_array()) urls += fmt::format(" (balance {})", balance.empty() ? "round_robin" : balance);
  for (const auto& m : at(t, "models")) models += (models.empty() ? "" : ", ") + text(m, "name");
  return fmt::format("{} ({}, model {})", esc(urls), esc(text(t, "api")), esc(models));
}

std::string spec_section(const json& spec) {
  std::string h = "<h2>Spec</h2><dl>";
  const bool regression = at(spec, "baseline").is_object();
  const json& target = regression ? at(at(spec, "baseline"), "target") : at(spec, "target");
  h += fmt::format("<dt>{}</dt><dd>{}</dd>", regression ? "baseline (A)" : "target", target_text(target));
  if (regression)
    h += fmt::format("<dt>candidate (B)</dt><dd>{}</dd>", target_text(at(at(spec, "candidate"), "target")));
  if (at(target, "labels").is_object() && !target["labels"].empty()) {
    std::string labels;
    for (const auto& [k, v] : target["labels"].items()) {
      labels += fmt::format("{}{}={}", labels.empty() ? "" : " &middot; ", esc(k),
                            esc(v.is_string() ? v.get<std::string>() : v.dump()));
    }
    h += fmt::format("<dt>labels</dt><dd id=\"labels\">{}</dd>", labels);
  }
  const json& w = at(spec, "workload");
  if (at(w, "dataset").is_object()) {
    const json& d = w["dataset"];
    h += fmt::format("<dt>workload</dt><dd>dataset {} (sha256 {}, {} order) &middot; output {} &middot; seed {}</dd>",
                     esc(text(d, "id")), esc(text(d, "sha256")), esc(text(d, "order")),
                     esc(at(d, "output_tokens").dump()), esc(text(w, "seed")));
  } else {
    h += fmt::format("<dt>workload</dt><dd>prompt {} &middot; output {} &middot; seed {}</dd>",
                     esc(at(w, "prompt_tokens").dump()), esc(at(w, "output_tokens").dump()), esc(text(w, "seed")));
  }
  h += fmt::format("<dt>arrival</dt><dd>{}</dd>", esc(at(spec, "arrival").dump()));
  if (at(spec, "sweep").is_object()) h += fmt::format("<dt>sweep</dt><dd>{}</dd>", esc(spec["sweep"].dump()));
  if (at(spec, "check").is_object()) h += fmt::format("<dt>check</dt><dd>{}</dd>", esc(spec["check"].dump()));
  for (const char* block : {"regression", "quality"}) {
    if (at(spec, block).is_object()) h += fmt::format("<dt>{}</dt><dd>{}</dd>", block, esc(spec[block].dump()));
  }
  h += fmt::format("<dt>SLO</dt><dd>{}</dd>", esc(describe_slo(at(spec, "slo"))));
  if (at(spec, "basis").is_string())
    h += fmt::format("<dt>basis</dt><dd>{}</dd>", esc(spec["basis"].get<std::string>()));
  return h + "</dl>\n";
}

// The SLO's bounds on one metric ("ttft_ms") as (percentile, bound) pairs.
std::vector<std::pair<double, double>> slo_bounds(const json& slo, const char* metric) {
  std::vector<std::pair<double, double>> out;
  const json& m = at(slo, metric);
  if (!m.is_object()) return out;
  for (const auto& [k, v] : m.items()) {
    if (k.size() < 2 || k[0] != 'p' || !v.is_number()) continue;
    try {
      out.emplace_back(std::stod(k.substr(1)), v.get<double>());
    } catch (const std::exception&) {
    }
  }
  return out;
}

// Charts of a rate or concurrency sweep: latency, ITL, throughput and the scraped gauges
// against the offered rate (or the number of users).
// The x axis of a sweep's charts: the offered rate, or the users of a concurrency sweep; the
// steps drawn on it, and the knee and max SLO markers.
struct SweepAxis {
  bool by_users = false;
  std::string x_name, against;
  std::vector<const json*> fixed;
  std::vector<Marker> markers;

  json x_of(const json& s) const { return by_users ? at(at(s, "summary"), "users") : at(s, "offered_rate_rps"); }
  // One series of y(step) over the axis' steps (steps without a number left out).
  Series series(const std::string& name, const std::string& colour, const std::function<json(const json&)>& y) const {
    Series out{name, colour, {}};
    for (const json* s : fixed) {
      const json v = y(*s);
      if (v.is_number()) out.points.emplace_back(x_of(*s).get<double>(), v.get<double>());
    }
    return out;
  }
};

SweepAxis sweep_axis(const json& sweep, const json& steps) {
  SweepAxis a;
  a.by_users = page_kind(sweep) == PageKind::concurrency_sweep;
  a.x_name = a.by_users ? "users (closed loop)" : "offered rate (req/s)";
  a.against = a.by_users ? "against users" : "against offered rate";
  for (const auto& s : steps) {
    if (a.x_of(s).is_number() && (!a.by_users || a.x_of(s).get<double>() > 0)) a.fixed.push_back(&s);
  }
  const json& r = at(sweep, "result");
  if (at(r, "knee_rate_rps").is_number()) a.markers.push_back({"knee", r["knee_rate_rps"].get<double>(), "#8250df"});
  if (at(r, "max_slo_rate_rps").is_number())
    a.markers.push_back({"max SLO rate", r["max_slo_rate_rps"].get<double>(), "#1a7f37"});
  if (at(r, "max_slo_concurrency").is_number())
    a.markers.push_back({"max SLO users", r["max_slo_concurrency"].get<double>(), "#1a7f37"});
  return a;
}

std::function<json(const json&)> summary_key(std::string key) {
  return [key](const json& s) { return at(at(s, "summary"), key.c_str()); };
}

// The SLO's bounds on a metric, as markers.
std::vector<Marker> slo_markers(const json& slo, const char* metric) {
  std::vector<Marker> out;
  for (const auto& [q, b] : slo_bounds(slo, metric))
    out.push_back({fmt::format("SLO {} {:g} ms", percentile_key(q), b), b, "#cf222e"});
  return out;
}

// TTFT at each reported percentile, on a log axis when latency spans decades past the knee.
Chart ttft_chart(const SweepAxis& a, const json& slo, const std::vector<double>& qs) {
  Chart ttft{"TTFT " + a.against, a.x_name, "TTFT (ms)", {}, slo_markers(slo, "ttft_ms"), a.markers, false};
  for (std::size_t i = 0; i < qs.size(); ++i) {
    ttft.series.push_back(a.series(percentile_key(qs[i]), color(i), summary_key(percentile_key(qs[i]) + "_ttft_ms")));
  }
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const auto& s : ttft.series) {
    for (const auto& [x, y] : s.points) {
      if (y > 0) lo = std::min(lo, y), hi = std::max(hi, y);
    }
  }
  ttft.log_y = hi > 0 && lo > 0 && hi / lo > 30;
  return ttft;
}

// The target's scraped queue and KV cache per step.
Chart gauges_chart(const SweepAxis& a) {
  auto server_key = [](const char* key) { return [key](const json& s) { return at(at(s, "server"), key); }; };
  return Chart{"Target's queue and KV cache (scraped)",
               a.x_name,
               "mean per step",
               {a.series("running", "#0969da", server_key("mean_running")),
                a.series("waiting", "#cf222e", server_key("mean_waiting")),
                a.series("KV cache %", "#8250df",
                         [](const json& s) {
                           const json& v = at(at(s, "server"), "mean_kv_cache_usage");
                           return v.is_number() ? json(100 * v.get<double>()) : json(nullptr);
                         })},
               {},
               a.markers,
               false};
}

std::string sweep_charts(const json& sweep, const json& steps, const std::vector<double>& qs) {
  const json& slo = at(at(sweep, "spec"), "slo");
  const SweepAxis a = sweep_axis(sweep, steps);
  std::string h = "<h2>Latency and throughput " + a.against + "</h2><div class=\"charts\">";
  h += render_chart(ttft_chart(a, slo, qs));
  h += render_chart(Chart{"ITL p95 " + a.against,
                          a.x_name,
                          "ITL p95 (ms)",
                          {a.series("ITL p95", "#bf8700", summary_key("p95_itl_ms")),
                           a.series("TPOT mean", "#0969da", summary_key("mean_tpot_ms"))},
                          slo_markers(slo, "itl_ms"),
                          a.markers,
                          false});
  const bool by_users = a.by_users;
  h += render_chart(Chart{
      "Achieved throughput and goodput",
      a.x_name,
      "req/s",
      {a.series("offered", "#8c959f", [by_users](const json& s) { return by_users ? json() : s["offered_rate_rps"]; }),
       a.series("completed", "#0969da", summary_key("request_throughput")),
       a.series("goodput", "#1a7f37", summary_key("request_goodput"))},
      {},
      a.markers,
      false});
  const Chart gauges = gauges_chart(a);
  bool scraped = false;
  for (const auto& s : gauges.series) scraped |= !s.points.empty();
  if (scraped) h += render_chart(gauges);
  return h + "</div>\n";
}

// One step's measured label in a legend: "check", or "16 users" for a closed-loop level.
std::string step_label(const json& s) {
  const json& users = at(at(s, "summary"), "users");
  if (users.is_number()) return fmt::format("{} users", users.dump());
  return text(s, "phase", "step");
}

// The distributions (CDFs) of TTFT, ITL and E2EL, one series per judged step, with each SLO
// bound marked at its latency (vertical) and its percentile (horizontal).
std::string distribution_charts(const json& slo, const std::vector<const json*>& judged) {
  std::string h = "<h2>Latency distributions</h2><div class=\"charts\" id=\"distributions\">";
  for (const auto& [metric, title] : {std::pair{"ttft_ms", "TTFT"}, {"itl_ms", "ITL"}, {"e2el_ms", "E2EL"}}) {
    Chart c{fmt::format("{} distribution (CDF)", title),
            fmt::format("{} (ms)", title),
            "requests at or below (%)",
            {},
            {},
            {},
            false};
    if (std::string_view(metric) == "itl_ms") c.y_label = "token gaps at or below (%)";
    for (std::size_t i = 0; i < judged.size(); ++i) {
      Series s{step_label(*judged[i]), color(i), {}};
      for (const auto& p : at(at(at(*judged[i], "summary"), "distribution"), metric)) {
        if (p.is_array() && p.size() == 2 && p[0].is_number() && p[1].is_number())
          s.points.emplace_back(p[1].get<double>(), p[0].get<double>());
      }
      if (!s.points.empty()) c.series.push_back(std::move(s));
    }
    for (const auto& [q, b] : slo_bounds(slo, metric)) {
      c.vlines.push_back({fmt::format("SLO {} {:g} ms", percentile_key(q), b), b, "#cf222e"});
      c.hlines.push_back({fmt::format("{:g}%", q), q, "#cf222e"});
    }
    h += render_chart(c);
  }
  return h + "</div>\n";
}

// A step over time: TTFT of the requests scheduled in each bin, and requests in flight.
std::string timeline_charts(const json& slo, const std::vector<const json*>& judged) {
  std::string h = "<h2>Over time</h2><div class=\"charts\" id=\"timeline\">";
  Chart ttft{"TTFT over time (requests scheduled in each bin)", "time in the step (s)", "TTFT (ms)", {}, {}, {}, false};
  Chart flight{"Requests in flight and completed", "time in the step (s)", "requests", {}, {}, {}, false};
  const bool one = judged.size() == 1;
  for (std::size_t i = 0; i < judged.size(); ++i) {
    const json& t = at(at(*judged[i], "summary"), "timeline");
    const double width = at(t, "width_s").is_number() ? t["width_s"].get<double>() : 1.0;
    const std::string who = one ? "" : step_label(*judged[i]) + " ";
    Series p50{who + "p50", one ? "#0969da" : color(i), {}}, p95{who + "p95", one ? "#bf8700" : color(i), {}};
    Series in_flight{who + "in flight", one ? "#8250df" : color(i), {}};
    Series done{"completed per second", "#1a7f37", {}};
    for (const auto& b : at(t, "bins")) {
      const double x = at(b, "t_s").is_number() ? b["t_s"].get<double>() + width / 2 : 0;
      if (at(b, "p50_ttft_ms").is_number()) p50.points.emplace_back(x, b["p50_ttft_ms"].get<double>());
      if (at(b, "p95_ttft_ms").is_number()) p95.points.emplace_back(x, b["p95_ttft_ms"].get<double>());
      if (at(b, "in_flight").is_number()) in_flight.points.emplace_back(x, b["in_flight"].get<double>());
      if (at(b, "completed").is_number()) done.points.emplace_back(x, b["completed"].get<double>() / width);
    }
    if (one) ttft.series.push_back(std::move(p50));
    ttft.series.push_back(std::move(p95));
    flight.series.push_back(std::move(in_flight));
    if (one) flight.series.push_back(std::move(done));
  }
  for (const auto& [q, b] : slo_bounds(slo, "ttft_ms"))
    ttft.hlines.push_back({fmt::format("SLO {} {:g} ms", percentile_key(q), b), b, "#cf222e"});
  h += render_chart(ttft);
  h += render_chart(flight);
  return h + "</div>\n";
}

// The step table: latencies at the report's percentiles, the target's gauges.
std::string steps_section(const json& steps, const std::vector<double>& qs, std::vector<std::string>& warnings) {
  std::string h =
      "<h2>Steps</h2><table id=\"steps\"><tr><th>#</th><th class=\"l\">phase</th><th>offered req/s</th>"
      "<th>completed req/s</th>";
  for (double q : qs) h += fmt::format("<th>TTFT {} ms</th>", percentile_key(q));
  h += "<th>ITL p95 ms</th><th>TPOT ms</th><th>goodput req/s</th><th>errors</th><th>running / waiting</th>"
       "<th>KV cache max %</th><th class=\"l\">verdict</th><th class=\"l\">notes</th></tr>";
  for (const auto& s : steps) {
    const json& m = at(s, "summary");
    const json& server = at(s, "server");
    std::string notes;
    if (at(s, "generator_limited") == true) notes += "generator-limited ";
    if (at(at(at(s, "evaluation"), "saturation"), "saturated") == true) notes += "saturated ";
    if (at(m, "users").is_number()) notes += fmt::format("{} users ", m["users"].dump());
    if (at(s, "verdict") == "inconclusive" && at(s, "offered_rate_rps").is_number()) {
      warnings.push_back(fmt::format("step {} at {} req/s was inconclusive (re-run longer)", text(s, "index"),
                                     num(s["offered_rate_rps"], "{:.2f}")));
    }
    if (at(s, "generator_limited") == true)
      warnings.push_back(fmt::format("step {} was generator-limited", text(s, "index")));
    h += fmt::format("<tr class=\"{}\"><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td>",
                     esc(text(s, "verdict")), esc(text(s, "index")), esc(text(s, "phase")),
                     num(at(s, "offered_rate_rps"), "{:.2f}"), num(at(m, "request_throughput"), "{:.2f}"));
    for (double q : qs) h += fmt::format("<td>{}</td>", num(at(m, (percentile_key(q) + "_ttft_ms").c_str())));
    const json& kv = at(server, "max_kv_cache_usage");
    h += fmt::format(
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l v\">{}</td><td "
        "class=\"l\">{}</td></tr>",
        num(at(m, "p95_itl_ms")), num(at(m, "mean_tpot_ms")), num(at(m, "request_goodput"), "{:.2f}"),
        esc(text(m, "failed", "0")),
        at(server, "mean_running").is_number() ? num(server["mean_running"]) + " / " + num(at(server, "mean_waiting"))
                                               : std::string("-"),
        kv.is_number() ? fmt::format("{:.0f}", 100 * kv.get<double>()) : std::string("-"), esc(text(s, "verdict")),
        esc(notes));
  }
  return h + "</table>\n";
}

// Sessions (workload.sessions): each step's figures turn by turn, so the growth of the
// context (prompt tokens) and what it costs (TTFT, ITL, E2EL) read side by side.
std::string sessions_section(const json& steps, const std::vector<double>& qs) {
  std::string rows;
  for (const auto& s : steps) {
    const json& m = at(s, "summary");
    const json& sessions = at(m, "sessions");
    for (const auto& t : at(m, "turns")) {
      rows += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>", esc(text(s, "index")),
                          esc(text(t, "turn")), esc(text(t, "completed")), num(at(t, "mean_prompt_tokens"), "{:.0f}"));
      for (double q : qs) rows += fmt::format("<td>{}</td>", num(at(t, (percentile_key(q) + "_ttft_ms").c_str())));
      rows += fmt::format(
          "<td>{}</td><td>{}</td><td class=\"l\">{}</td></tr>", num(at(t, "p95_itl_ms")), num(at(t, "mean_e2el_ms")),
          t.value("turn", 0) == 1
              ? fmt::format("{} sessions: {} completed, {} cut, {} broken", esc(text(sessions, "started")),
                            esc(text(sessions, "completed")), esc(text(sessions, "cut")), esc(text(sessions, "broken")))
              : std::string());
    }
  }
  if (rows.empty()) return {};
  std::string h =
      "<h2>Sessions, turn by turn</h2><table id=\"turns\"><tr><th>step</th><th>turn</th><th>completed</th>"
      "<th>prompt tokens (mean)</th>";
  for (double q : qs) h += fmt::format("<th>TTFT {} ms</th>", percentile_key(q));
  return h + "<th>ITL p95 ms</th><th>E2EL mean ms</th><th class=\"l\">sessions</th></tr>" + rows + "</table>\n";
}

// A target of several models (target.models): each step's figures model by model, beside the
// step's total, with each model's own SLO verdict.
// Each model's (list "models", named by "model") or replica's ("replicas", "replica") figures
// at every step, beside the total.
struct SplitTable {
  const char* list;
  const char* name;
  const char* title;
};

std::string split_section(const json& steps, const std::vector<double>& qs, const SplitTable& t) {
  std::string rows;
  for (const auto& s : steps) {
    for (const auto& m : at(at(s, "summary"), t.list)) {
      rows += fmt::format("<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td>",
                          esc(text(s, "index")), esc(text(m, t.name)), esc(text(m, "completed")),
                          esc(text(m, "failed")), num(at(m, "request_throughput")));
      for (double q : qs) rows += fmt::format("<td>{}</td>", num(at(m, (percentile_key(q) + "_ttft_ms").c_str())));
      rows += fmt::format("<td>{}</td><td>{}</td><td>{}</td></tr>", num(at(m, "p95_itl_ms")), num(at(m, "p95_e2el_ms")),
                          esc(text(m, "slo_verdict")));
    }
  }
  if (rows.empty()) return {};
  std::string h = fmt::format(
      "<h2>{}</h2><table id=\"{}\"><tr><th>step</th><th class=\"l\">{}</th>"
      "<th>completed</th><th>failed</th><th>req/s</th>",
      t.title, t.list, t.name);
  for (double q : qs) h += fmt::format("<th>TTFT {} ms</th>", percentile_key(q));
  return h + "<th>ITL p95 ms</th><th>E2EL p95 ms</th><th>SLO</th></tr>" + rows + "</table>\n";
}

std::string warnings_section(const json& r, std::vector<std::string> warnings) {
  for (const auto& wv : at(r, "warnings")) {
    if (wv.is_string()) warnings.push_back(wv.get<std::string>());
  }
  std::string h = "<h2>Warnings</h2>";
  if (warnings.empty()) h += "<p class=\"muted\">none</p>";
  for (const auto& wv : warnings) h += "<div class=\"warn\">" + esc(wv) + "</div>";
  return h;
}

}  // namespace

std::string render_report(const json& sweep, const json& steps, const json& windows) {
  const json& spec = at(sweep, "spec");
  const json& r = at(sweep, "result");
  const PageKind kind = page_kind(sweep);
  const std::vector<double> qs = report_percentiles(spec);
  std::string h = head_section(sweep, kind);
  h += verdict_section(sweep);
  h += spec_section(spec);
  // The steps whose requests were judged as a whole: the check's step, or each closed-loop level.
  std::vector<const json*> judged;
  for (const auto& s : steps) {
    const std::string k = text(s, "kind");
    if ((kind == PageKind::check && k == "check") || (kind == PageKind::concurrency_sweep && k == "level"))
      judged.push_back(&s);
  }
  if (kind == PageKind::regression) h += regression_sections(sweep, steps);
  if (kind == PageKind::scenario) h += scenario_sections(sweep, windows);
  if (kind == PageKind::rate_sweep || kind == PageKind::concurrency_sweep) h += sweep_charts(sweep, steps, qs);
  if (!judged.empty()) {
    h += distribution_charts(at(spec, "slo"), judged);
    h += timeline_charts(at(spec, "slo"), judged);
  }
  std::vector<std::string> warnings;
  h += sessions_section(steps, qs);
  h += split_section(steps, qs, {"models", "model", "Models, one by one"});
  h += split_section(steps, qs, {"replicas", "replica", "Replicas, one by one"});
  h += steps_section(steps, qs, warnings);
  h += warnings_section(r, std::move(warnings));
  h += "\n<p class=\"muted\">Generated by capsweep from the stored steps. Latencies are measured from each request's "
       "scheduled send time; see the README's metric definitions.</p>\n</body></html>\n";
  return h;
}

}  // namespace capsweep::report

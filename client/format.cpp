#include "format.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "core/json_access.hpp"
#include "core/metrics.hpp"
#include "core/slo.hpp"

namespace capsweep::cli {

namespace {

using json = nlohmann::json;

using capsweep::json_at;
const json& at(const json& j, const char* key) {
  return json_at(j, key);
}

std::string metric_name(const std::string& key) {
  // "ttft_ms" -> "TTFT", "e2el_sent_ms" -> "E2EL (sent)"
  std::string base = key.substr(0, key.rfind("_ms"));
  std::string suffix;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, "_sent") == 0) {
    base = base.substr(0, base.size() - 5);
    suffix = " (sent)";
  }
  for (char& c : base) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return base + suffix;
}

// "p95_ttft_ms" -> "TTFT p95"; "saturation" stays.
std::string criterion_name(const std::string& name) {
  const auto us = name.find('_');
  if (us == std::string::npos || name.size() < 4 || name.compare(name.size() - 3, 3, "_ms") != 0) return name;
  return metric_name(name.substr(us + 1)) + " " + name.substr(0, us);
}

std::string num(const json& v, const char* f = "{:.1f}") {
  return v.is_number() ? fmt::format(fmt::runtime(f), v.get<double>()) : std::string("-");
}

}  // namespace

std::string text_of(const json& j, const char* key, const std::string& fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? terminal_safe(it->get_ref<const std::string&>()) : fallback;
}

std::string terminal_safe(std::string_view text, bool multiline) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' || c == '\t') {
      out += multiline ? static_cast<char>(c) : ' ';
      continue;
    }
    if (c < 0x20 || c == 0x7f) continue;
    // C1 controls in UTF-8: C2 80..C2 9F (CSI is C2 9B).
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
        static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      ++i;
      continue;
    }
    out += static_cast<char>(c);
  }
  return out;
}

std::string duration_text(double s) {
  if (!std::isfinite(s) || s < 0) return "-";
  const long t = std::lround(s);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string slo_text(const json& slo) {
  return describe_slo(slo);
}

namespace {

// A concurrency sweep: the most users within the SLO and one line per level.
std::string concurrency_verdict(const json& r, const json& slo) {
  std::string out = at(r, "max_slo_concurrency").is_number()
                        ? fmt::format("max {} users within SLO ({}), {} req/s achieved there",
                                      num(at(r, "max_slo_concurrency"), "{:g}"), slo_text(slo),
                                      num(at(r, "rate_at_max_slo_concurrency_rps"), "{:.2f}"))
                        : fmt::format("no number of users met the SLO ({})", slo_text(slo));
  if (at(r, "limiting_metric").is_string())
    out += "; limited by " + criterion_name(at(r, "limiting_metric").get<std::string>());
  out += "\n   users  achieved req/s  TTFT p50 ms  TTFT p95 ms  ITL p95 ms  E2EL mean ms  verdict";
  for (const auto& l : at(r, "levels")) {
    out += fmt::format("\n  {:>6}  {:>14}  {:>11}  {:>11}  {:>10}  {:>12}  {}", num(at(l, "users"), "{:g}"),
                       num(at(l, "achieved_rate_rps"), "{:.2f}"), num(at(l, "p50_ttft_ms")), num(at(l, "p95_ttft_ms")),
                       num(at(l, "p95_itl_ms")), num(at(l, "mean_e2el_ms")), text_of(l, "verdict", ""));
  }
  for (const auto& w : r.value("warnings", json::array())) out += "\n  warning: " + w.get<std::string>();
  return out;
}

}  // namespace

namespace {

std::string upper(std::string v) {
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v;
}

std::string runs_text(const json& runs) {
  std::string out;
  for (const auto& v : runs) out += (out.empty() ? "" : " ") + num(v, "{:.4g}");
  return out.empty() ? "-" : out;
}

std::string signed_pct(const json& v) {
  return v.is_number() ? fmt::format("{:+.1f}%", v.get<double>()) : std::string("-");
}

// "k=v k=v" of a labels object ("none" when empty).
std::string labels_text(const json& labels) {
  std::string out;
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items())
      if (v.is_string())
        out += fmt::format("{}{}={}", out.empty() ? "" : " ", terminal_safe(k), terminal_safe(v.get<std::string>()));
  }
  return out.empty() ? "none" : out;
}

// The gauges scraped from the target during a step: "running mean 12.5 max 14, ...".
std::string server_text(const json& server) {
  std::string out;
  for (const auto& [name, mean, max] :
       {std::tuple{"running", "mean_running", "max_running"}, std::tuple{"waiting", "mean_waiting", "max_waiting"},
        std::tuple{"KV cache", "mean_kv_cache_usage", "max_kv_cache_usage"}}) {
    if (!at(server, mean).is_number() && !at(server, max).is_number()) continue;
    out += fmt::format("{}{} mean {} max {}", out.empty() ? "" : ", ", name, num(at(server, mean), "{:.3g}"),
                       num(at(server, max), "{:.3g}"));
  }
  return out.empty() ? "not scraped" : out;
}

// The rest of the five-part record under every kind's verdict: what the target is (its
// labels; a regression's two sides), the arrivals sent, the server's gauges where a step
// scraped them, and the basis.
std::string record_text(const json& sweep) {
  const json& r = at(sweep, "result");
  std::string out;
  if (at(r, "candidate").is_object()) {
    out += "\n  baseline labels: " + labels_text(at(at(r, "baseline"), "labels"));
    out += "\n  candidate labels: " + labels_text(at(at(r, "candidate"), "labels"));
  } else {
    out += "\n  labels: " + labels_text(at(r, "labels"));
  }
  const json& arrival = at(r, "arrival");
  if (arrival.is_object() && text_of(r, "kind", "sweep") != "scenario") {
    const std::string process = text_of(arrival, "process", "poisson");
    out += "\n  arrivals: " + process;
    if (process == "gamma") out += fmt::format(" (burstiness {})", num(at(arrival, "burstiness"), "{:g}"));
  }
  if (at(r, "mlperf_scenario").is_string()) out += "\n  MLPerf scenario: " + text_of(r, "mlperf_scenario", "");
  const json& server = at(at(r, "observations"), "server");
  if (server.is_object()) out += "\n  server: " + server_text(server);
  const std::string basis = text_of(r, "basis", "");
  out += "\n  basis: " + (basis.empty() ? std::string("none given") : basis);
  return out;
}

}  // namespace

// A regression's quality table: each check's rates, drop, p and verdict ("" for none).
std::string quality_text(const json& quality) {
  if (!quality.is_object() || quality.empty()) return "";
  std::string out = fmt::format("  {:<20} {:>10} {:>10} {:>6} {:>9} {:>9}  {}\n", "quality", "baseline", "candidate",
                                "n", "drop", "p", "verdict");
  auto pct = [](const json& v) { return v.is_number() ? fmt::format("{:.1f}%", 100 * v.get<double>()) : "-"; };
  for (const auto& [check, q] : quality.items()) {
    out += fmt::format("  {:<20} {:>10} {:>10} {:>6} {:>9} {:>9}  {}\n", terminal_safe(check),
                       pct(at(q, "baseline_rate")), pct(at(q, "candidate_rate")), num(at(q, "n"), "{:g}"),
                       at(q, "drop_pp").is_number() ? fmt::format("{:.1f} pp", at(q, "drop_pp").get<double>()) : "-",
                       num(at(q, "p_value"), "{:.2g}"), upper(text_of(q, "verdict", "?")));
  }
  return out;
}

// How a sequential regression spent its rounds ("" for fixed rounds).
std::string sequential_text(const json& r) {
  const json& q = at(r, "sequential");
  if (!q.is_object()) return "";
  return fmt::format("  rounds: {} (at most {}, alpha {} a look)\n", terminal_safe(text_of(q, "stopped", "?")),
                     num(at(q, "max_rounds"), "{:g}"), num(at(q, "alpha_per_look"), "{:.3g}"));
}

std::string compare_text(const json& sweep) {
  const json& r = at(sweep, "result");
  const json& c = at(r, "conditions");
  // A trace's runs: at its own rate (a speed) or scaled to the rate.
  const json& trace = at(c, "trace");
  const std::string load = !trace.is_object() ? fmt::format("{} req/s", num(at(c, "rate_rps"), "{:g}"))
                           : at(c, "rate_rps").is_null()
                               ? fmt::format("a trace replayed at {}x speed", num(at(trace, "speed"), "{:g}"))
                               : fmt::format("{} req/s (a trace scaled to it)", num(at(c, "rate_rps"), "{:g}"));
  std::string out = fmt::format("{}: candidate {} ({}) against baseline {} ({}) at {}, {} rounds of {} s\n",
                                upper(text_of(r, "verdict", "?")), text_of(at(r, "candidate"), "base_url", "?"),
                                text_of(at(r, "candidate"), "model", "?"), text_of(at(r, "baseline"), "base_url", "?"),
                                text_of(at(r, "baseline"), "model", "?"), load, num(at(c, "rounds"), "{:g}"),
                                num(at(c, "duration_s"), "{:g}"));
  out += fmt::format("  {:<20} {:<26} {:<26} {:>8}  {:<18} {:>9} {:>9}  {}\n", "metric", "baseline runs",
                     "candidate runs", "change", "interval", "threshold", "p", "verdict");
  for (const auto& [key, m] : at(r, "metrics").items()) {
    const json& ci = at(m, "ci_pct");
    const std::string interval = ci.is_array() && ci.size() == 2
                                     ? fmt::format("[{}, {}]", signed_pct(ci[0]), signed_pct(ci[1]))
                                     : std::string("-");
    const std::string bound = fmt::format("{}{}%", text_of(m, "worse", "higher") == "higher" ? "+" : "-",
                                          num(at(m, "threshold_pct"), "{:g}"));
    out += fmt::format("  {:<20} {:<26} {:<26} {:>8}  {:<18} {:>9} {:>9}  {}{}\n", terminal_safe(key),
                       runs_text(at(m, "baseline_runs")), runs_text(at(m, "candidate_runs")),
                       signed_pct(at(m, "change_pct")), interval, bound, num(at(m, "p_value"), "{:.2g}"),
                       upper(text_of(m, "verdict", "?")),
                       at(m, "a_to_a_exceeds_threshold") == true ? " (A-A spread)" : "");
  }
  out += quality_text(at(r, "quality"));
  if (const json& j = at(r, "judge"); j.is_object()) {
    const json& cal = at(j, "calibration");
    const json& ci = at(cal, "ci");
    const std::string gating =
        at(j, "gates") == true
            ? fmt::format("gates: Spearman {} [{}, {}] with {} human labels", num(at(cal, "spearman"), "{:.3f}"),
                          num(capsweep::json_item(ci, 0), "{:.3f}"), num(capsweep::json_item(ci, 1), "{:.3f}"),
                          num(at(cal, "scored"), "{:g}"))
            : "advisory (not calibrated against human labels)";
    out += fmt::format("  judge: mean score {} vs {} ({}), {}; {}\n", num(at(j, "baseline_mean"), "{:.2f}"),
                       num(at(j, "candidate_mean"), "{:.2f}"), signed_pct(at(j, "change_pct")),
                       upper(text_of(j, "verdict", "?")), gating);
  }
  out += sequential_text(r);
  for (const auto& w : at(r, "warnings")) {
    if (w.is_string()) out += "  warning: " + terminal_safe(w.get<std::string>()) + "\n";
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out + record_text(sweep);
}

namespace {

// A check's measured value or bound: a number, or an object's numbers "k=v, ...".
std::string figure_text(const json& v) {
  if (v.is_number()) return fmt::format("{:g}", v.get<double>());
  if (!v.is_object()) return "-";
  std::string out;
  for (const auto& [k, x] : v.items()) {
    if (!x.is_number()) continue;
    out += fmt::format("{}{}={:g}", out.empty() ? "" : ", ", terminal_safe(k), x.get<double>());
  }
  return out.empty() ? "-" : out;
}

// The load an open-loop check offered: its rate, a trace's replay speed, or its sessions' rate
// beside the requests (turns) they offered.
std::string check_load(const json& r) {
  const json& c = at(r, "conditions");
  const json& offered = at(at(r, "observations"), "offered_rate_rps");
  if (text_of(c, "arrival", "") == "trace") {
    return fmt::format("a trace replayed at {}x speed ({} req/s offered)", num(at(at(c, "trace"), "speed"), "{:g}"),
                       num(offered, "{:.2f}"));
  }
  if (c.contains("sessions")) {
    return fmt::format("{} sessions/s ({} req/s offered as their turns)", num(at(c, "rate_rps"), "{:g}"),
                       num(at(at(c, "sessions"), "offered_rate_rps"), "{:.2f}"));
  }
  return fmt::format("{} req/s", num(at(c, "rate_rps"), "{:g}"));
}

}  // namespace

std::string scenario_text(const json& sweep) {
  const json& r = at(sweep, "result");
  const json& c = at(r, "conditions");
  std::string out =
      fmt::format("{}: scenario of {} s ({} windows of {} s, capacity {} req/s) against {}\n",
                  upper(text_of(r, "verdict", "?")), num(at(c, "duration_s"), "{:g}"), num(at(r, "windows"), "{:g}"),
                  num(at(c, "window_s"), "{:g}"), num(at(c, "capacity_rps"), "{:.2f}"), text_of(c, "target", "?"));
  out += fmt::format("  {:<20} {:>30} {:>30} {:>9}  {}\n", "check", "measured", "bound", "windows", "verdict");
  for (const auto& [name, k] : at(r, "checks").items()) {
    const json& w = at(k, "windows");
    const std::string windows = w.is_array() && w.size() == 2 && w[0].is_number()
                                    ? fmt::format("{}..{}", num(w[0], "{:g}"), num(w[1], "{:g}"))
                                    : std::string("-");
    std::string measured = figure_text(at(k, "measured")) + " " + text_of(k, "unit", "");
    std::string ranking;
    if (name == "metric_choice" && at(at(k, "measured"), "ranking").is_array()) {
      measured = "ranking below";
      for (const auto& g : at(at(k, "measured"), "ranking"))
        if (g.is_string()) ranking += (ranking.empty() ? "" : " > ") + terminal_safe(g.get<std::string>());
    }
    out += fmt::format("  {:<20} {:>30} {:>30} {:>9}  {}\n", terminal_safe(name), measured, figure_text(at(k, "bound")),
                       windows, upper(text_of(k, "verdict", "?")));
    if (!ranking.empty()) out += "      " + ranking + "\n";
    if (!text_of(k, "detail", "").empty()) out += "      " + text_of(k, "detail", "") + "\n";
  }
  const json& s = at(r, "summary");
  out += fmt::format("  requests: {} scheduled, {} completed, {} failed ({} fast rejections); pooled TTFT p95 {} ms",
                     num(at(s, "scheduled"), "{:g}"), num(at(s, "completed"), "{:g}"), num(at(s, "failed"), "{:g}"),
                     num(at(s, "rejected"), "{:g}"), num(at(s, "pooled_p95_ttft_ms"), "{:.0f}"));
  for (const auto& w : at(r, "warnings")) {
    if (w.is_string()) out += "\n  warning: " + terminal_safe(w.get<std::string>());
  }
  return out + record_text(sweep);
}

std::string windows_table(const json& windows) {
  std::string out =
      fmt::format("{:>5} {:>7} {:>8} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>8} {:>6} {:>5} {:>4} {:>5} {:>7}  {}\n",
                  "win", "t_s", "offered", "sched", "done", "infl", "TTFT p50", "TTFT p95", "TTFT p99", "ITL p95",
                  "errors", "rej", "cut", "ready", "desired", "events");
  for (const auto& w : windows) {
    std::uint64_t errors = 0;
    for (const auto& [kind, n] : at(w, "errors").items())
      if (n.is_number()) errors += n.get<std::uint64_t>();
    std::string events;
    for (const auto& e : at(w, "events")) events += (events.empty() ? "" : " ") + text_of(e, "kind", "?");
    out += fmt::format(
        "{:>5} {:>7} {:>8} {:>6} {:>6} {:>6} {:>9} {:>9} {:>9} {:>8} {:>6} {:>5} {:>4} {:>5} {:>7}  {}\n",
        num(at(w, "index"), "{:g}"), num(at(w, "t_start_s"), "{:.1f}"), num(at(w, "offered_rps"), "{:.2f}"),
        num(at(w, "scheduled"), "{:g}"), num(at(w, "completed"), "{:g}"), num(at(w, "in_flight"), "{:g}"),
        num(at(w, "p50_ttft_ms"), "{:.0f}"), num(at(w, "p95_ttft_ms"), "{:.0f}"), num(at(w, "p99_ttft_ms"), "{:.0f}"),
        num(at(w, "p95_itl_ms"), "{:.1f}"), errors, num(at(w, "rejected"), "{:g}"), num(at(w, "cut"), "{:g}"),
        num(at(w, "ready"), "{:g}"), num(at(w, "desired"), "{:g}"), events);
  }
  return out;
}

namespace {

// A sweep's search in two lines: where the capacity lies (the answer's step's resolution) and
// how the sweep's time went; empty for results that predate it.
std::string search_text(const json& search) {
  if (!search.is_object()) return {};
  std::string out;
  const json& res = at(search, "resolution");
  if (res.is_object() && at(res, "capacity_interval_rps").is_array()) {
    const json& iv = at(res, "capacity_interval_rps");
    out += fmt::format("\n  capacity between {} and {} req/s (a {}-s step may miss an overload under {}%)", num(iv[0]),
                       num(iv[1]), num(at(res, "step_s"), "{:.0f}"), num(at(res, "undetected_overload_pct"), "{:.1f}"));
  }
  const json& time = at(search, "time_s");
  std::string phases;
  if (time.is_object()) {
    for (const auto& [phase, secs] : time.items())
      if (phase != "total" && secs.is_number())
        phases += fmt::format("{}{} {:.0f} s", phases.empty() ? "" : ", ", phase, secs.get<double>());
  }
  out += fmt::format(
      "\n  search: {}, {} full-length steps{}; {} s ({})", terminal_safe(text_of(search, "mode", "?")),
      num(at(search, "full_steps"), "{:g}"),
      search.contains("scout_steps") ? fmt::format(" and {} scouts", num(at(search, "scout_steps"), "{:g}")) : "",
      num(at(time, "total"), "{:.0f}"), phases);
  return out;
}

}  // namespace

std::string verdict_text(const json& sweep) {
  const std::string status = text_of(sweep, "status", "");
  if (status == "failed") return "FAILED: " + text_of(sweep, "error", "(no reason recorded)");
  if (status == "cancelled") return "CANCELLED: " + text_of(sweep, "error", std::string());
  if (status != "succeeded") return fmt::format("not finished ({})", status);
  const json& r = at(sweep, "result");
  const json slo = sweep.contains("spec") ? at(sweep, "spec").value("slo", json::object()) : json::object();
  if (text_of(r, "kind", "sweep") == "regression") return compare_text(sweep);
  if (text_of(r, "kind", "sweep") == "scenario") return scenario_text(sweep);
  if (text_of(r, "kind", "sweep") == "check") {
    std::string v = text_of(r, "verdict", "inconclusive");
    for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const json& c = at(r, "conditions");
    std::string out =
        text_of(c, "mode", "rate") == "concurrency"
            ? fmt::format("{}: {} with {} users in a closed loop ({} req/s achieved, {} s measured) against {}", v,
                          slo_text(slo), num(at(c, "concurrency"), "{:g}"), num(at(c, "achieved_rate_rps"), "{:.2f}"),
                          num(at(c, "duration_s"), "{:g}"), text_of(at(r, "target"), "base_url", ""))
            : fmt::format("{}: {} at {} ({} arrivals, {} s measured) against {}", v, slo_text(slo), check_load(r),
                          text_of(c, "arrival", ""), num(at(c, "duration_s"), "{:g}"),
                          text_of(at(r, "target"), "base_url", ""));
    for (const auto& k : at(r, "criteria")) {
      out += fmt::format("\n  {:<22} measured {:>10}  bound {:>10}  {}", criterion_name(text_of(k, "name", "")),
                         num(at(k, "measured"), "{:.3f}"), num(at(k, "bound"), "{:g}"), text_of(k, "verdict", ""));
    }
    if (r.value("saturated", false)) out += "\n  saturated: the completions fell behind the offered rate";
    for (const auto& w : at(r, "warnings"))
      if (w.is_string()) out += "\n  warning: " + terminal_safe(w.get<std::string>());
    return out + record_text(sweep);
  }
  if (text_of(r, "mode", "rate") == "concurrency") return concurrency_verdict(r, slo) + record_text(sweep);
  std::string out;
  if (at(r, "max_slo_rate_rps").is_number()) {
    out = fmt::format("max {:.1f} req/s within SLO ({})", at(r, "max_slo_rate_rps").get<double>(), slo_text(slo));
  } else {
    out = fmt::format("no rate met the SLO ({})", slo_text(slo));
  }
  if (at(r, "knee_rate_rps").is_number())
    out += fmt::format("; knee at {:.1f} req/s", at(r, "knee_rate_rps").get<double>());
  if (at(r, "limiting_metric").is_string())
    out += "; limited by " + criterion_name(at(r, "limiting_metric").get<std::string>());
  const json& b = at(r, "slo_bracket_rps");
  if (b.is_array() && b.size() == 2)
    out += fmt::format("\n  bracket: passes at {} req/s, fails at {} req/s", num(b[0]), num(b[1]));
  if (at(r, "saturation_rate_rps").is_number())
    out += fmt::format("\n  saturation from {:.1f} req/s", at(r, "saturation_rate_rps").get<double>());
  out += search_text(at(r, "search"));
  const json& c = at(r, "concurrency_at_max_slo");
  if (c.is_object()) {
    out += fmt::format("\n  in flight at the max rate: {} (Little's law), {} (server running+waiting)",
                       num(at(c, "littles_law")), num(at(c, "server_running_waiting")));
  }
  out += fmt::format("\n  baseline {} req/s synchronous, probe {} req/s flat out",
                     num(at(at(r, "baseline"), "rate_rps"), "{:.2f}"), num(at(at(r, "probe"), "rate_rps"), "{:.1f}"));
  if (at(r, "trace").is_object())
    out += fmt::format("\n  load: trace {} replayed at each step's rate, looped",
                       terminal_safe(text_of(at(r, "trace"), "dataset", "?")));
  for (const auto& w : r.value("warnings", json::array())) out += "\n  warning: " + w.get<std::string>();
  return out + record_text(sweep);
}

std::string steps_table(const json& steps) {
  // TTFT at the job's report.percentiles (p50/p95/p99 when they are the defaults); ITL p95;
  // the target's mean running and waiting requests and its peak KV-cache use when scraped.
  std::vector<double> qs;
  if (!steps.empty() && at(at(steps[0], "summary"), "percentiles").is_array()) {
    for (const auto& q : steps[0]["summary"]["percentiles"])
      if (q.is_number()) qs.push_back(q.get<double>());
  }
  if (qs.empty() || qs == kDefaultPercentiles) qs = {50, 95, 99};
  std::size_t phase_width = 9;  // wide enough for the longest phase ("round 2 candidate")
  for (const auto& s : steps) phase_width = std::max(phase_width, text_of(s, "phase", "").size());
  std::string head = fmt::format("{:>3}  {:<{}} {:>9} {:>9}", "#", "phase", phase_width, "offered", "achieved");
  std::string units = fmt::format("{:>3}  {:<{}} {:>9} {:>9}", "", "", phase_width, "req/s", "req/s");
  for (double q : qs) {
    head += fmt::format(" {:>10}", "TTFT " + percentile_key(q));
    units += fmt::format(" {:>10}", "ms");
  }
  head += fmt::format(" {:>8} {:>8} {:>9} {:>11} {:>5}  {:<12} {}\n", "ITL p95", "TPOT", "goodput", "run/wait", "KV%",
                      "verdict", "notes");
  units += fmt::format(" {:>8} {:>8} {:>9} {:>11} {:>5}\n", "ms", "ms", "req/s", "mean", "max");
  std::string out = head + units;
  for (const auto& s : steps) {
    const json& m = at(s, "summary");
    const json& server = at(s, "server");
    std::string notes;
    if (s.value("generator_limited", false)) notes += "generator-limited ";
    const json& sat = at(s, "evaluation").value("saturation", json::object());
    if (sat.value("saturated", false)) notes += "saturated ";
    if (m.contains("probe")) notes += fmt::format("r_max {} ", num(at(at(m, "probe"), "rate_rps")));
    if (m.contains("rate_rps") && text_of(s, "kind", "") == "baseline")
      notes += fmt::format("r_sync {} ", num(at(m, "rate_rps"), "{:.2f}"));
    if (at(m, "users").is_number()) notes += fmt::format("{} users ", at(m, "users").dump());
    if (text_of(s, "kind", "") == "quality") {
      notes += fmt::format("{} of {} items answered ", num(at(m, "answered"), "{:g}"), num(at(m, "items"), "{:g}"));
    }
    std::string row =
        fmt::format("{:>3}  {:<{}} {:>9} {:>9}", s.value("index", 0), text_of(s, "phase", ""), phase_width,
                    num(at(s, "offered_rate_rps"), "{:.2f}"), num(at(m, "achieved_rate_rps"), "{:.2f}"));
    for (double q : qs) {
      const std::string key = percentile_key(q) + "_ttft_ms";
      row += fmt::format(" {:>10}", num(at(m, key.c_str())));
    }
    const json& kv = at(server, "max_kv_cache_usage");
    const std::string run_wait = at(server, "mean_running").is_number()
                                     ? num(at(server, "mean_running")) + "/" + num(at(server, "mean_waiting"))
                                     : std::string("-");
    row += fmt::format(" {:>8} {:>8} {:>9} {:>11} {:>5}  {:<12} {}\n", num(at(m, "p95_itl_ms")),
                       num(at(m, "mean_tpot_ms")), num(at(m, "request_goodput"), "{:.2f}"), run_wait,
                       kv.is_number() ? fmt::format("{:.0f}", 100 * kv.get<double>()) : std::string("-"),
                       text_of(s, "verdict", ""), notes);
    out += row;
  }
  return out;
}

std::string progress_text(const json& sweep, bool bar) {
  const json& p = at(sweep, "progress");
  const std::string status = text_of(sweep, "status", "");
  if (status == "queued") return "queued: waiting for the target (one sweep per target at a time)";
  std::string out = fmt::format("{:<8}", text_of(p, "phase", status));
  if (at(p, "step").is_number() && at(p, "steps_planned").is_number()) {
    out += fmt::format("  step {}/{}", at(p, "step").get<int>(), at(p, "steps_planned").get<int>());
  }
  if (at(p, "percent").is_number()) {
    const double pct = std::clamp(at(p, "percent").get<double>(), 0.0, 100.0);
    if (bar) {
      const int filled = static_cast<int>(std::lround(pct / 5));
      out += "  [" + std::string(static_cast<std::size_t>(filled), '#') +
             std::string(static_cast<std::size_t>(20 - filled), '.') + "]";
    }
    out += fmt::format("  {:5.1f}%", pct);
  }
  if (p.contains("current_rate_rps") && at(p, "current_rate_rps").is_number()) {
    out += fmt::format("  {:.1f} req/s", at(p, "current_rate_rps").get<double>());
  }
  if (p.contains("p95_ttft_ms_so_far") && at(p, "p95_ttft_ms_so_far").is_number() &&
      at(p, "p95_ttft_ms_so_far").get<double>() > 0) {
    out += fmt::format("  p95 TTFT {:.0f} ms", at(p, "p95_ttft_ms_so_far").get<double>());
  }
  if (p.contains("eta_s") && at(p, "eta_s").is_number()) out += "  ETA " + duration_text(at(p, "eta_s").get<double>());
  if (const json& w = at(p, "window"); w.is_object()) {
    out +=
        fmt::format("  | window {} at {} s: offered {} req/s, TTFT p95 {} ms, ready {}/{}", num(at(w, "index"), "{:g}"),
                    num(at(w, "t_start_s"), "{:g}"), num(at(w, "offered_rps"), "{:.1f}"),
                    num(at(w, "p95_ttft_ms"), "{:.0f}"), num(at(w, "ready"), "{:g}"), num(at(w, "desired"), "{:g}"));
  }
  return out;
}

}  // namespace capsweep::cli

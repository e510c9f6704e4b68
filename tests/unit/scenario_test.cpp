// Scenario jobs sans I/O: the scenario block (values, defaults, errors naming the field), the
// profile in requests per second, and every check judged on fabricated windows and events,
// each both ways.
#include "sweep/scenario.hpp"

#include <catch2/catch.hpp>

#include "api/schema.hpp"
#include "core/windows.hpp"
#include "sweep/spec.hpp"

using namespace capsweep;
using json = nlohmann::json;

namespace {

const api::SchemaValidator& validator() {
  static const api::SchemaValidator v(api::embedded_schema("sweep-spec.schema.json"));
  return v;
}

json scenario_spec() {
  return {{"kind", "scenario"},
          {"target",
           {{"base_url", "http://127.0.0.1:8000"},
            {"metrics_url", "http://127.0.0.1:8000/metrics"},
            {"api", "chat"},
            {"model", "m"}}},
          {"scenario",
           {{"capacity_rps", 10},
            {"window_s", 5},
            {"profile",
             {{{"duration_s", 20}, {"capacity_x", 0.5}},
              {{"duration_s", 40}, {"capacity_x", 1.5}},
              {{"duration_s", 40}, {"rate_rps", 5}, {"oscillate", {{"amplitude_rps", 3}, {"period_s", 20}}}}}},
            {"replicas", {{"metric", {{"ready", "fleet_replicas_ready"}, {"desired", "fleet_replicas_desired"}}}}},
            {"checks",
             {{"scale_up_reaction_s", {{"max", 30}}},
              {"slo_during_scale_up", {{"max_error_rate", 0.05}, {"ttft_p95_ms", 2000}}},
              {"recovery_s", {{"max", 60}, {"windows", 2}}},
              {"scale_down", json::object()},
              {"flapping", {{"max_direction_changes", 1}}}}}}},
          {"slo", {{"ttft_ms", {{"p95", 800}}}}}};
}

// The error field the schema, then the parser, name (empty when valid).
std::string first_error(json spec) {
  if (auto ok = validator().validate(spec); !ok) return ok.error().field;
  validator().apply_defaults(spec);
  auto parsed = sweep::parse_job_spec(spec);
  return parsed ? std::string() : parsed.error().field;
}

sweep::JobSpec parsed(json spec) {
  REQUIRE(first_error(spec).empty());
  validator().apply_defaults(spec);
  return sweep::parse_job_spec(spec).value();
}

json with(json spec, const std::string& pointer, json value) {
  spec[json::json_pointer(pointer)] = std::move(value);
  return spec;
}

// A window row as stored: 20 requests scheduled, their TTFTs all `ttft_ms`, and the
// replica counts given.
json window(int i, double ttft_ms, std::optional<double> ready, std::optional<double> desired = std::nullopt,
            std::uint64_t failed = 0, std::uint64_t cut = 0) {
  WindowAccumulator acc(std::chrono::seconds(5), std::chrono::seconds(5), GoodputBounds{});
  for (int k = 0; k < 20; ++k) {
    RequestRecord r;
    r.scheduled = r.dispatched = r.sent = std::chrono::milliseconds(100 * k);
    const bool fails = static_cast<std::uint64_t>(k) < failed;
    r.outcome = fails ? Outcome::connect : Outcome::ok;
    if (!fails) {
      const Nanos first = r.scheduled + Nanos(static_cast<std::int64_t>(ttft_ms * 1e6));
      r.chunks = {{first, 1}, {first + std::chrono::milliseconds(1), 1}};
      r.output_tokens = 2;
    }
    r.finished = fails ? r.scheduled + std::chrono::milliseconds(1) : r.chunks.back().arrival;
    acc.on_scheduled(r.scheduled);
    acc.on_ended(r, false);
  }
  auto rows = acc.take_closed(
      std::chrono::seconds(5), 0, {}, [](Nanos, Nanos) { return 20.0; }, true);
  REQUIRE(rows.size() == 1);
  rows[0].index = i;
  rows[0].t_start_s = 5.0 * i;
  rows[0].cut = cut;
  json w = window_json(rows[0]);
  w["ready"] = ready ? json(*ready) : json(nullptr);
  w["desired"] = desired ? json(*desired) : json(nullptr);
  return w;
}

json events() {
  return json::array();
}

}  // namespace

namespace {
json with_basis(json spec, const char* basis) {
  spec["basis"] = basis;
  return spec;
}
}  // namespace

TEST_CASE("scenario spec: the block's values, its defaults and the profile in requests per second") {
  const auto s = parsed(scenario_spec());
  CHECK(s.kind == sweep::JobKind::scenario);
  REQUIRE(s.scenario.has_value());
  const auto& sc = *s.scenario;
  CHECK(sc.capacity_rps == 10);
  CHECK(sc.window == std::chrono::seconds(5));
  CHECK(sc.drain_timeout == std::chrono::seconds(30));
  REQUIRE(sc.segments.size() == 3);
  CHECK(sc.segments[1].capacity_x == 1.5);
  REQUIRE(sc.replicas.has_value());
  CHECK(sc.replicas->metric.at("ready") == "fleet_replicas_ready");
  CHECK(sc.checks.scale_up_reaction_max_s == 30);
  CHECK(sc.checks.recovery->windows == 2);
  CHECK(sc.checks.scale_down_max_cut_streams == 0u);
  CHECK(sc.checks.flapping_max_direction_changes == 1);
  CHECK_FALSE(sc.checks.cold_start.has_value());
  const auto p = sweep::scenario_profile(sc).value();
  CHECK(p.duration() == std::chrono::seconds(100));
  CHECK(p.rate_at(std::chrono::seconds(10)) == Approx(5));
  CHECK(p.rate_at(std::chrono::seconds(30)) == Approx(15));
  CHECK(p.rate_at(std::chrono::seconds(65)) == Approx(8));  // 5 + 3 sin(pi/2)
  // 20 s x 5 + 40 s x 15 + 40 s x 5 (whole periods of the oscillation add nothing).
  CHECK(p.expected_total() == Approx(900).epsilon(1e-6));
  CHECK(sweep::spike_start_s(s, p) == Approx(20));
  // A ramp crosses the capacity inside its segment.
  json ramp = with(scenario_spec(), "/scenario/profile",
                   json::array({{{"duration_s", 40}, {"rate_rps", 0}, {"to_capacity_x", 2}}}));
  const auto r = parsed(ramp);
  CHECK(sweep::spike_start_s(r, sweep::scenario_profile(*r.scenario).value()) == Approx(20));
  // A Prometheus source with its queries; the URLs the allow-list sees.
  json prom = with(scenario_spec(), "/scenario/replicas",
                   {{"prometheus", {{"url", "http://127.0.0.1:9090"}, {"ready", "sum(up)"}, {"serving", "sum(x)"}}}});
  prom["scenario"]["readiness_url"] = "http://127.0.0.1:8000/health";
  const auto ps = parsed(prom);
  CHECK(ps.scenario->replicas->prometheus->queries.at("serving") == "sum(x)");
  const auto urls = sweep::side_urls(ps);
  CHECK(std::count(urls.begin(), urls.end(),
                   std::pair<std::string, std::string>{"/scenario/replicas/prometheus/url", "http://127.0.0.1:9090"}) ==
        1);
  CHECK(std::count(urls.begin(), urls.end(),
                   std::pair<std::string, std::string>{"/scenario/readiness_url", "http://127.0.0.1:8000/health"}) ==
        1);
}

TEST_CASE("scenario spec: errors name the field") {
  const json s = scenario_spec();
  CHECK(first_error(with(s, "/scenario/profile", json::array())) == "/scenario/profile");
  CHECK(first_error(with(s, "/scenario/profile/0/duration_s", 0)) == "/scenario/profile/0/duration_s");
  CHECK(first_error(with(s, "/scenario/profile/0/duration_s", -5)) == "/scenario/profile/0/duration_s");
  CHECK(first_error(with(s, "/scenario/profile/0/rate_rps", 3)) == "/scenario/profile/0/rate_rps");  // and capacity_x
  json neither = s;
  neither["scenario"]["profile"][0].erase("capacity_x");
  CHECK(first_error(neither) == "/scenario/profile/0/rate_rps");
  json no_capacity = s;
  no_capacity["scenario"].erase("capacity_rps");
  CHECK(first_error(no_capacity) == "/scenario/profile/0/capacity_x");
  CHECK(first_error(with(s, "/scenario/from_sweep", "sweep-1")) == "/scenario/from_sweep");
  CHECK(first_error(with(s, "/scenario/window_s", 0.5)) == "/scenario/window_s");
  CHECK(first_error(with(s, "/scenario/profile/2/oscillate/amplitude_rps", 9)) ==
        "/scenario/profile/2/oscillate");  // below zero at the trough
  CHECK(first_error(with(s, "/scenario/checks/bogus", json::object())) == "/scenario/checks/bogus");
  CHECK(first_error(with(s, "/scenario/checks/recovery_s", json{{"windows", 0}})) ==
        "/scenario/checks/recovery_s/windows");
  CHECK(first_error(with(s, "/scenario/checks/scale_up_reaction_s", json::object())) ==
        "/scenario/checks/scale_up_reaction_s/max");
  json no_replicas = s;
  no_replicas["scenario"].erase("replicas");
  CHECK(first_error(no_replicas) == "/scenario/checks/scale_up_reaction_s");
  CHECK(first_error(with(s, "/scenario/replicas", json{{"metric", {{"desired", "x"}}}})) ==
        "/scenario/replicas/metric/ready");
  CHECK(first_error(with(s, "/scenario/replicas", json{{"prometheus", {{"url", "ftp://x"}, {"ready", "up"}}}})) ==
        "/scenario/replicas/prometheus/url");
  json no_metrics = s;
  no_metrics["target"].erase("metrics_url");
  CHECK(first_error(no_metrics) == "/scenario/replicas/metric");
  CHECK(first_error(with(s, "/arrival", json{{"process", "all_at_once"}})) == "/arrival/process");
  CHECK(first_error(with(s, "/sweep", json::object())) == "/sweep");
  // The block belongs to scenario jobs only.
  CHECK(first_error(with(s, "/kind", "check")) == "/scenario");
}

TEST_CASE("scenario spec: a trace follows the profile - its speed and loop are refused, a dataset needed") {
  json s = with(scenario_spec(), "/arrival", json{{"process", "trace"}});
  s["workload"] = {{"dataset", {{"id", "ds-0123456789abcdef"}}}};
  CHECK(parsed(s).arrival.process == ArrivalProcess::trace);
  CHECK(first_error(with(s, "/arrival/speed", 2)) == "/arrival/speed");
  CHECK(first_error(with(s, "/arrival/loop", true)) == "/arrival/loop");
  CHECK(first_error(with(s, "/workload", json::object())) == "/workload/dataset");
  CHECK(first_error(with(s, "/workload/dataset/order", "shuffled")) == "/workload/dataset/order");
}

TEST_CASE("scenario checks: scale-up reaction, recovery and the SLO while scaling, both ways") {
  const auto spec = parsed(scenario_spec());
  const auto profile = sweep::scenario_profile(*spec.scenario).value();
  // The spike starts at 20 s (window 4). A fleet that adds a replica by the end of window 5
  // (30 s: 10 s after the spike) and meets the SLO from window 6 on.
  std::vector<json> fast;
  for (int i = 0; i < 20; ++i) {
    const double ttft = i == 4 || i == 5 ? 1500 : 100;
    fast.push_back(window(i, ttft, i < 5 ? 1 : 2, i < 4 ? 1 : 2));
  }
  json r = sweep::scenario_result(spec, profile, fast, events());
  CHECK(r["basis"] == spec.basis);  // the record keeps the spec's basis, as every kind's does
  CHECK(sweep::scenario_result(parsed(with_basis(scenario_spec(), "runbook 7")), profile, fast, events())["basis"] ==
        "runbook 7");
  CHECK(r["checks"]["scale_up_reaction_s"]["verdict"] == "pass");
  CHECK(r["checks"]["scale_up_reaction_s"]["measured"].get<double>() == Approx(10));
  CHECK(r["checks"]["scale_up_reaction_s"]["windows"] == json::array({5, 5}));
  CHECK(r["checks"]["recovery_s"]["verdict"] == "pass");
  CHECK(r["checks"]["recovery_s"]["measured"].get<double>() == Approx(10));  // window 6 starts at 30 s
  CHECK(r["checks"]["slo_during_scale_up"]["verdict"] == "pass");
  CHECK(r["checks"]["slo_during_scale_up"]["measured"]["ttft_p95_ms"].get<double>() == Approx(1500).epsilon(0.01));
  CHECK(r["checks"]["slo_during_scale_up"]["windows"] == json::array({4, 5}));

  // A fleet that never scales: the reaction fails, the SLO is never met again after the spike.
  std::vector<json> stuck;
  for (int i = 0; i < 20; ++i)
    stuck.push_back(window(i, i >= 4 && i < 12 ? 3000 : 100, 1, 1, i >= 4 && i < 12 ? 5 : 0));
  json s = sweep::scenario_result(spec, profile, stuck, events());
  CHECK(s["checks"]["scale_up_reaction_s"]["verdict"] == "fail");
  CHECK(s["checks"]["slo_during_scale_up"]["verdict"] == "fail");
  CHECK(s["checks"]["slo_during_scale_up"]["measured"]["error_rate"].get<double>() == Approx(0.25));
  CHECK(s["checks"]["recovery_s"]["measured"].get<double>() == Approx(40));  // window 12 at 60 s
  CHECK(s["checks"]["recovery_s"]["verdict"] == "pass");                     // within 60 s
  CHECK(s["verdict"] == "fail");
  // A fleet that held the SLO throughout: judged on the spike's first window, and passed.
  std::vector<json> calm;
  for (int i = 0; i < 20; ++i) calm.push_back(window(i, 100, 1, 1));
  const json c = sweep::scenario_result(spec, profile, calm, events())["checks"]["slo_during_scale_up"];
  CHECK(c["verdict"] == "pass");
  CHECK(c["windows"] == json::array({4, 4}));
  // A slower reaction than its bound fails too.
  json slow_spec = scenario_spec();
  slow_spec["scenario"]["checks"]["scale_up_reaction_s"]["max"] = 5;
  const auto slow = parsed(slow_spec);
  CHECK(sweep::scenario_result(slow, profile, fast, events())["checks"]["scale_up_reaction_s"]["verdict"] == "fail");
}

TEST_CASE("scenario checks: scale-down cuts and flapping, both ways") {
  const auto spec = parsed(scenario_spec());
  const auto profile = sweep::scenario_profile(*spec.scenario).value();
  // The oscillating segment is 60..100 s (windows 12..19).
  auto run = [&](bool cuts, bool flaps) {
    std::vector<json> w;
    for (int i = 0; i < 20; ++i) {
      double ready = i < 6 ? 1 : i < 12 ? 3 : 2;
      double desired = ready;
      if (flaps && i >= 12) desired = (i / 2) % 2 ? 3 : 2;  // up and down every 10 s
      w.push_back(window(i, 100, ready, desired, 0, cuts && i == 12 ? 2 : 0));
    }
    return sweep::scenario_result(spec, profile, w, events());
  };
  json honest = run(false, false);
  CHECK(honest["checks"]["scale_down"]["verdict"] == "pass");
  CHECK(honest["checks"]["scale_down"]["measured"] == 0);
  CHECK(honest["checks"]["flapping"]["verdict"] == "pass");
  CHECK(honest["checks"]["flapping"]["measured"] == 0);
  json bad = run(true, true);
  CHECK(bad["checks"]["scale_down"]["verdict"] == "fail");
  CHECK(bad["checks"]["scale_down"]["measured"] == 2);
  CHECK(bad["checks"]["flapping"]["verdict"] == "fail");
  CHECK(bad["checks"]["flapping"]["measured"].get<int>() >= 2);
  CHECK(bad["verdict"] == "fail");
  // Without a decrease the scale-down check cannot tell.
  std::vector<json> flat;
  for (int i = 0; i < 20; ++i) flat.push_back(window(i, 100, 1, 1));
  CHECK(sweep::scenario_result(spec, profile, flat, events())["checks"]["scale_down"]["verdict"] == "inconclusive");
}

TEST_CASE("scenario checks: cold start and readiness from the events, both ways") {
  json j = scenario_spec();
  j["scenario"]["checks"] = {{"cold_start", {{"expected_s", 8}, {"tolerance_pct", 10}}},
                             {"readiness", {{"window_s", 5}, {"max_ttft_ms", 1000}}}};
  const auto spec = parsed(j);
  const auto profile = sweep::scenario_profile(*spec.scenario).value();
  std::vector<json> calm;
  for (int i = 0; i < 20; ++i) calm.push_back(window(i, 100, 1));
  json ev = json::array({{{"kind", "first_token"}, {"t_s", 8.3}, {"ttft_ms", 8300}, {"outcome", "ok"}},
                         {{"kind", "readiness"}, {"t_s", 8.0}, {"ready", true}}});
  json r = sweep::scenario_result(spec, profile, calm, ev);
  CHECK(r["checks"]["cold_start"]["verdict"] == "pass");
  CHECK(r["checks"]["cold_start"]["measured"]["first_ttft_s"].get<double>() == Approx(8.3));
  // A first request that failed outright fails the check.
  json refused_first = ev;
  refused_first[0]["ttft_ms"] = nullptr;
  refused_first[0]["outcome"] = "http_5xx";
  const json rf = sweep::scenario_result(spec, profile, calm, refused_first)["checks"]["cold_start"];
  CHECK(rf["verdict"] == "fail");
  CHECK(rf["measured"]["first_outcome"] == "http_5xx");
  // 12 s is outside 8 s ± 10%.
  ev[0]["ttft_ms"] = 12000;
  CHECK(sweep::scenario_result(spec, profile, calm, ev)["checks"]["cold_start"]["verdict"] == "fail");
  // Ready at 8 s, yet the requests scheduled after it wait 30 s for a first token (a replica
  // that said ready while loading) or fail to connect.
  const auto requests = [](double from_s, double to_s, std::optional<double> ttft_ms, Outcome o = Outcome::ok,
                           bool rejected = false) {
    EarliestRequests e;
    for (double t = from_s; t < to_s; t += 0.5) e.add({t, ttft_ms, o, rejected});
    return e;
  };
  const EarliestRequests fast = requests(0, 100, 100);
  CHECK(sweep::scenario_result(spec, profile, calm, ev, fast)["checks"]["readiness"]["verdict"] == "pass");
  json l = sweep::scenario_result(spec, profile, calm, ev, requests(0, 100, 30000));
  CHECK(l["checks"]["readiness"]["verdict"] == "fail");
  CHECK(l["checks"]["readiness"]["measured"]["max_ttft_ms"].get<double>() == Approx(30000));
  CHECK(l["checks"]["readiness"]["windows"][0] == 1);
  // The moment lists the first requests after it, with their TTFTs.
  const json& moment = l["checks"]["readiness"]["measured"]["moments"][0];
  CHECK(moment["at_s"] == 8.0);
  CHECK(moment["requests"] == 10);  // 8.0, 8.5, ..., 12.5
  REQUIRE(moment["first_requests"].size() == 5);
  CHECK(moment["first_requests"][0]["scheduled_s"] == 8.0);
  CHECK(moment["first_requests"][0]["ttft_ms"] == 30000.0);
  // Requests held while the target was loading, scheduled before it said ready, are the cold
  // start's; the readiness check judges those after the moment.
  EarliestRequests held = requests(8, 100, 100);
  for (double t = 0; t < 8; t += 0.5) held.add({t, 8000 - t * 1000, Outcome::ok, false});
  CHECK(sweep::scenario_result(spec, profile, calm, ev, held)["checks"]["readiness"]["verdict"] == "pass");
  // Connections refused after the moment fail it; fast 503s ("not ready") do not.
  const json refused = sweep::scenario_result(spec, profile, calm, ev, requests(8, 11, std::nullopt, Outcome::connect));
  CHECK(refused["checks"]["readiness"]["measured"]["failed_requests"] == 6);
  CHECK(refused["checks"]["readiness"]["verdict"] == "fail");
  EarliestRequests honest_503 = requests(8, 9, std::nullopt, Outcome::http_5xx, true);
  for (double t = 9; t < 20; t += 0.5) honest_503.add({t, 100, Outcome::ok, false});
  CHECK(sweep::scenario_result(spec, profile, calm, ev, honest_503)["checks"]["readiness"]["verdict"] == "pass");
  // Without max_ttft_ms the bound is 5 x the lowest window p95 (at least 500 ms): a target whose
  // first windows are slow because it lied is not excused by its own slowness.
  json no_bound = j;
  no_bound["scenario"]["checks"]["readiness"] = {{"window_s", 5}};
  const auto nb = parsed(no_bound);
  std::vector<json> slow_first = calm;
  slow_first[0] = window(0, 8000, 1);
  slow_first[1] = window(1, 6000, 1);
  json at_start = json::array({{{"kind", "readiness"}, {"t_s", 0.0}, {"ready", true}}});
  EarliestRequests lied = requests(0, 8, 8000);
  for (double t = 8; t < 100; t += 0.5) lied.add({t, 100, Outcome::ok, false});
  const json c = sweep::scenario_result(nb, profile, slow_first, at_start, lied)["checks"]["readiness"];
  CHECK(c["verdict"] == "fail");
  CHECK(c["bound"]["max_ttft_ms"] == 500.0);
  CHECK(sweep::scenario_result(nb, profile, slow_first, at_start,
                               requests(0, 100, 100))["checks"]["readiness"]["verdict"] == "pass");
  // A replica count that grows is a moment of readiness too (dated from its window's start);
  // none at all, or no request after any, is inconclusive.
  json grow = json::array({{{"kind", "replicas"}, {"which", "ready"}, {"from", 1}, {"to", 2}, {"t_s", 55}}});
  EarliestRequests late = requests(0, 50, 100);
  for (double t = 50; t < 55; t += 0.5) late.add({t, 30000, Outcome::ok, false});
  CHECK(sweep::scenario_result(spec, profile, calm, grow, late)["checks"]["readiness"]["verdict"] == "fail");
  CHECK(sweep::scenario_result(spec, profile, calm, grow, requests(0, 100, 100))["checks"]["readiness"]["verdict"] ==
        "pass");
  // From none ready, the requests before the count was read waited for the first replica (the
  // cold start's): the moment is the window's end, or the readiness flip read in that window.
  json first_up = json::array({{{"kind", "replicas"}, {"which", "ready"}, {"from", 0}, {"to", 1}, {"t_s", 10}}});
  EarliestRequests waited = requests(10, 100, 100);
  for (double t = 0; t < 10; t += 0.5) waited.add({t, 10000 - t * 1000, Outcome::ok, false});
  const json up = sweep::scenario_result(spec, profile, calm, first_up, waited)["checks"]["readiness"];
  CHECK(up["verdict"] == "pass");
  CHECK(up["measured"]["moments"][0]["at_s"] == 10.0);
  json flipped = first_up;
  flipped.push_back({{"kind", "readiness"}, {"t_s", 7.5}, {"ready", true}});
  const json fl = sweep::scenario_result(spec, profile, calm, flipped, waited)["checks"]["readiness"];
  REQUIRE(fl["measured"]["moments"].size() == 1);
  CHECK(fl["measured"]["moments"][0]["at_s"] == 7.5);
  CHECK(fl["verdict"] == "fail");  // requests at 7.5 .. 9.5 still waited 2.5 .. 0.5 s
  CHECK(sweep::scenario_result(spec, profile, calm, json::array(), fast)["checks"]["readiness"]["verdict"] ==
        "inconclusive");
  CHECK(sweep::scenario_result(spec, profile, calm, ev)["checks"]["readiness"]["verdict"] == "inconclusive");
  CHECK(sweep::scenario_result(spec, profile, calm, json::array())["checks"]["cold_start"]["verdict"] ==
        "inconclusive");
}

TEST_CASE("earliest requests: the first of each bucket by schedule, in order, and whether some were dropped") {
  EarliestRequests e(std::chrono::milliseconds(100), 2);
  // Out of order, as requests end: 0.05 and 0.02 are kept of 0.07, 0.05, 0.02, 0.09.
  for (double t : {0.07, 0.05, 0.02, 0.09}) e.add({t, t * 1000, Outcome::ok, false});
  e.add({0.15, 1.0, Outcome::timeout, false});
  auto all = e.between(0, 1);
  REQUIRE(all.size() == 3);
  CHECK(all[0].scheduled_s == 0.02);
  CHECK(all[1].scheduled_s == 0.05);
  CHECK(all[2].scheduled_s == 0.15);
  CHECK(all[2].outcome == Outcome::timeout);
  CHECK(e.dropped_between(0, 0.1));
  CHECK_FALSE(e.dropped_between(0.1, 0.2));
  // The range is half-open, and an empty or reversed one is empty.
  CHECK(e.between(0.05, 0.15).size() == 1);
  CHECK(e.between(0.2, 0.1).empty());
  // A non-finite time is not kept.
  e.add({std::numeric_limits<double>::infinity(), 1.0, Outcome::ok, false});
  CHECK(e.between(-1e18, 1e18).size() == 3);
}

TEST_CASE("earliest requests: a long step keeps the ranges asked for and its recent past, nothing else") {
  EarliestRequests e(std::chrono::milliseconds(100), 4);
  e.keep(30, 40);  // a moment at 30 s, judged over 10 s
  for (double t = 0; t < 100; t += 0.25) e.add({t, 50, Outcome::ok, false});
  const std::size_t all = e.buckets();
  CHECK(all == 400);
  e.forget_before(80);
  // Kept: 30..40 s and 80..100 s (a request every 0.25 s: 40 and 80 buckets).
  CHECK(e.buckets() == 120);
  CHECK(e.between(30, 40).size() == 40);
  CHECK(e.between(0, 30).empty());
  CHECK(e.between(40, 80).empty());
  CHECK(e.between(80, 100).size() == 80);
  // A request that ends late keeps its place if its time is kept, and is dropped if not.
  e.add({35.01, 9000, Outcome::ok, false});
  e.add({10.01, 9000, Outcome::ok, false});
  CHECK(e.between(35, 35.1).size() == 2);
  CHECK(e.between(10, 10.1).empty());
  // Forgetting moves only forward.
  e.forget_before(50);
  CHECK(e.between(80, 100).size() == 80);
}

TEST_CASE("scenario checks: metric_choice ranks the gauges that follow the users above one that saturates") {
  json j = scenario_spec();
  j["scenario"]["checks"] = {{"metric_choice", json::object()}};
  const auto spec = parsed(j);
  const auto profile = sweep::scenario_profile(*spec.scenario).value();
  std::vector<json> w;
  for (int i = 0; i < 20; ++i) {
    const double load = i < 4 ? 1 : i < 12 ? 2 + (i - 4) : 3;  // builds up in the spike
    json row = window(i, 100 * load, 1);
    row["in_flight"] = static_cast<int>(4 * load);
    row["server"] = {{"vllm:num_requests_waiting", 2 * load - 2},
                     {"vllm:num_requests_running", 4 * load},
                     {"DCGM_FI_DEV_GPU_UTIL", load > 1 ? 100.0 : 90.0}};
    w.push_back(row);
  }
  json r = sweep::scenario_result(spec, profile, w, events());
  const json& m = r["checks"]["metric_choice"];
  CHECK(m["verdict"] == "advisory");
  REQUIRE(m["measured"]["ranking"].size() == 3);
  CHECK(m["measured"]["ranking"][2] == "DCGM_FI_DEV_GPU_UTIL");
  // Advisory: it never decides the job's verdict.
  CHECK(r["verdict"] == "pass");
  // No named check at all: nothing judged, said so.
  json none = scenario_spec();
  none["scenario"].erase("checks");
  none["scenario"].erase("replicas");
  json n = sweep::scenario_result(parsed(none), profile, w, events());
  CHECK(n["verdict"] == "inconclusive");
  CHECK(n["warnings"].size() == 1);
}

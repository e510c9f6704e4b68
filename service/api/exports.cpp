// Handlers of the exports of a sweep: steps.csv, requests.csv, quality.jsonl, the HTML report
// and the autoscaler thresholds.

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/write.hpp>
#include <functional>
#include <map>
#include <sstream>

#include "api/handlers.hpp"
#include "core/json_access.hpp"
#include "core/text.hpp"
#include "core/trace_context.hpp"
#include "report/autoscale.hpp"
#include "report/html.hpp"
#include "report/percentiles.hpp"

namespace capsweep::api {

namespace {
using json = nlohmann::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
}  // namespace

// GET /v1/sweeps/{id}/report: the self-contained HTML report.
Answer get_report(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  json windows = json::array();
  if (row->kind == "scenario") {
    for (auto& w : env.ctx.store->windows(c.id)) windows.push_back(std::move(w));
  }
  return text_response(c.req, "text/html; charset=utf-8",
                       report::render_report(sweep_view(env, *row), steps_view(env, c.id), windows));
}

namespace {

// A CSV field (RFC 4180): quoted, its quotes doubled, where it holds a comma, a quote or a line break.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string out = "\"";
  for (const char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// A target of several models (target.models) or replicas (target.base_urls): each one's
// columns, 1 to the most any step measured: its name, its SLO verdict, its counts and
// latencies. `list`: the summary's list ("models"), `name`: its name's key and the columns'
// prefix ("model": model1_name, model1_slo_verdict, ...).
struct SplitColumns {
  const char* list;
  const char* name;
  std::vector<std::string> keys;
  std::size_t count = 0;

  SplitColumns(const char* list_key, const char* name_key, const std::vector<store::StepRow>& steps,
               const std::vector<double>& qs)
      : list(list_key), name(name_key) {
    keys = {"completed", "failed", "request_throughput", "output_throughput"};
    for (const char* metric : {"ttft", "itl", "e2el"}) {
      for (auto& k : report::latency_keys(metric, qs)) keys.push_back(std::move(k));
    }
    for (const auto& s : steps) count = std::max(count, json_at(s.summary, list).size());
  }
  std::string header() const {
    std::string out;
    for (std::size_t m = 1; m <= count; ++m) {
      out += fmt::format(",{0}{1}_name,{0}{1}_slo_verdict", name, m);
      for (const auto& k : keys) out += fmt::format(",{}{}_{}", name, m, k);
    }
    return out;
  }
  // One step's cells; `cell` writes a number's.
  template <class Cell>
  std::string cells(const json& summary, const Cell& cell) const {
    std::string out;
    const json& all = json_at(summary, list);
    for (std::size_t m = 0; m < count; ++m) {
      const json& one = m < all.size() ? all[m] : json::object();
      for (const char* text : {name, "slo_verdict"}) {
        const json& v = json_at(one, text);
        out += "," + (v.is_string() ? csv_field(v.get<std::string>()) : std::string());
      }
      for (const auto& k : keys) out += cell(one, k);
    }
    return out;
  }
};

}  // namespace

// GET /v1/sweeps/{id}/steps.csv: one line per step with its main figures: the latencies at
// the job's report.percentiles, and the target's scraped gauges (empty when not scraped).
Answer get_steps_csv(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  const std::vector<double> qs = report::report_percentiles(row->spec);
  std::vector<std::string> keys{"completed",         "failed",          "request_throughput",
                                "output_throughput", "request_goodput", "achieved_rate_rps"};
  for (const char* metric : {"ttft", "tpot", "itl", "e2el"}) {
    for (auto& k : report::latency_keys(metric, qs)) keys.push_back(std::move(k));
  }
  for (const char* k : {"p99_schedule_lag_ms", "duration_s"}) keys.emplace_back(k);
  static const std::array<const char*, 6> server_keys{"mean_running", "max_running",         "mean_waiting",
                                                      "max_waiting",  "mean_kv_cache_usage", "max_kv_cache_usage"};
  const auto steps = env.ctx.store->steps(c.id);
  // Sessions (workload.sessions): each turn's figures, turn 1 to the most turns any step measured.
  std::vector<std::string> turn_keys{"completed", "mean_prompt_tokens"};
  for (auto& k : report::latency_keys("ttft", qs)) turn_keys.push_back(std::move(k));
  for (auto& k : report::latency_keys("itl", qs)) turn_keys.push_back(std::move(k));
  turn_keys.emplace_back("mean_e2el_ms");
  std::size_t turns = 0;
  for (const auto& s : steps) turns = std::max(turns, json_at(s.summary, "turns").size());
  const SplitColumns model_columns("models", "model", steps, qs), replica_columns("replicas", "replica", steps, qs);
  std::string csv = "step,kind,phase,offered_rate_rps,verdict,generator_limited";
  for (const auto& k : keys) csv += "," + k;
  for (const char* k : server_keys) csv += std::string(",server_") + k;
  if (turns > 0) csv += ",offered_session_rate_sps";
  for (std::size_t t = 1; t <= turns; ++t) {
    for (const auto& k : turn_keys) csv += fmt::format(",turn{}_{}", t, k);
  }
  csv += model_columns.header() + replica_columns.header() + "\n";
  auto cell = [](const json& j, const std::string& k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number() ? fmt::format(",{:.4f}", it->get<double>()) : std::string(",");
  };
  for (const auto& s : steps) {
    csv += fmt::format("{},{},{},{},{},{}", s.index, s.kind, s.phase,
                       s.offered_rate_rps ? fmt::format("{:.4f}", *s.offered_rate_rps) : std::string(), s.verdict,
                       s.generator_limited ? 1 : 0);
    for (const auto& k : keys) csv += cell(s.summary, k);
    const json server = s.server.is_object() ? s.server : json::object();
    for (const char* k : server_keys) csv += cell(server, k);
    if (turns > 0) csv += cell(json_at(s.summary, "sessions"), "offered_rate_sps");
    const json& step_turns = json_at(s.summary, "turns");
    for (std::size_t t = 0; t < turns; ++t) {
      const json& turn = t < step_turns.size() ? step_turns[t] : json::object();
      for (const auto& k : turn_keys) csv += cell(turn, k);
    }
    csv += model_columns.cells(s.summary, cell) + replica_columns.cells(s.summary, cell) + "\n";
  }
  return text_response(c.req, "text/csv; charset=utf-8", std::move(csv), c.id + "-steps.csv");
}

// GET /v1/sweeps/{id}/requests.csv: one line per request of every stored step, streamed in
// chunks of a page of rows; each page is read on the worker pool, so neither the store's lock
// nor memory is held for the whole export.
namespace {

// Streams an export of a sweep in chunked encoding, a page at a time: `next_page` runs on the
// worker pool and appends the next page's text, returning false after the last page. Neither
// the store's lock nor the whole export is held at once.
asio::awaitable<http::Reply> stream_pages(Env& env, asio::any_io_executor pool, const Call& c,
                                          beast::tcp_stream& stream, std::string content_type, std::string filename,
                                          std::string text, std::function<bool(std::string&)> next_page) {
  const auto on_pool = [&](auto f) {
    return asio::co_spawn(
        pool, [f]() -> asio::awaitable<decltype(f())> { co_return f(); }, asio::use_awaitable);
  };
  const bool exists = co_await on_pool([&] { return env.ctx.store->sweep(c.id).has_value(); });
  if (!exists) {
    http::Reply reply;
    reply.response = http::json_response(c.req, bhttp::status::not_found, error_body(no_sweep(c)));
    co_return reply;
  }
  bhttp::response<bhttp::empty_body> head{bhttp::status::ok, c.req.version()};
  head.set(bhttp::field::server, "capsweepd");
  if (!c.request_id.empty()) head.set("X-Request-Id", c.request_id);
  head.set(bhttp::field::content_type, content_type);
  head.set(bhttp::field::content_disposition, fmt::format("attachment; filename=\"{}\"", filename));
  head.chunked(true);
  head.keep_alive(c.req.keep_alive());
  bhttp::response_serializer<bhttp::empty_body> sr{head};
  stream.expires_after(std::chrono::seconds(30));
  auto [hec, hn] = co_await bhttp::async_write_header(stream, sr, asio::as_tuple(asio::use_awaitable));
  if (hec) co_return http::Reply{std::nullopt, false};
  for (bool more = true; more;) {
    more = co_await on_pool([&] { return next_page(text); });
    if (!text.empty()) {
      stream.expires_after(std::chrono::seconds(30));
      const auto chunk = bhttp::make_chunk(asio::buffer(text));  // named: see api.cpp on co_await temporaries
      auto [wec, wn] = co_await asio::async_write(stream, chunk, asio::as_tuple(asio::use_awaitable));
      if (wec) co_return http::Reply{std::nullopt, false};
      text.clear();
    }
  }
  stream.expires_after(std::chrono::seconds(30));
  const auto last = bhttp::make_chunk_last();
  auto [lec, ln] = co_await asio::async_write(stream, last, asio::as_tuple(asio::use_awaitable));
  co_return http::Reply{std::nullopt, !lec && c.req.keep_alive()};
}

}  // namespace

// A request's TPOT (ms): (last token - first token) / (output tokens - 1), from its stored
// latencies (both from the schedule, so their difference is last - first); none for a failed
// request or one with fewer than two tokens.
std::optional<double> tpot_ms(const store::RequestRow& r) {
  if (r.outcome != "ok" || r.output_tokens < 2 || !r.ttft_ms || !r.e2el_ms) return std::nullopt;
  return (*r.e2el_ms - *r.ttft_ms) / (r.output_tokens - 1);
}

asio::awaitable<http::Reply> stream_requests_csv(Env& env, asio::any_io_executor pool, const Call& c,
                                                 beast::tcp_stream& stream) {
  constexpr std::size_t kPage = 5000;
  auto num = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f}", *v) : std::string(); };
  std::optional<store::Store::RequestKey> after;
  auto next_page = [&](std::string& text) {
    const auto page = env.ctx.store->requests_page(c.id, after, kPage);
    for (const auto& [step, r] : page) {
      // The traceparent it was sent with: derived from the job, the step and the request, as
      // the engine (and every load agent) derived it.
      text += fmt::format("{},{},{:.3f},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", step, r.index, r.scheduled_ms,
                          num(r.dispatched_ms), num(r.sent_ms), num(r.finished_ms), num(r.ttft_ms), num(r.e2el_ms),
                          r.input_tokens, r.output_tokens, r.chunks, printable_ascii(r.outcome, 40), num(tpot_ms(r)),
                          r.itl_ms, r.turn ? std::to_string(r.turn) : std::string(),
                          traceparent(step_trace_id(c.id, static_cast<std::uint64_t>(step)), r.index));
    }
    if (page.size() < kPage) return false;
    after = store::Store::RequestKey{page.back().first, page.back().second.index};
    return true;
  };
  co_return co_await stream_pages(
      env, pool, c, stream, "text/csv; charset=utf-8", c.id + "-requests.csv",
      "step,request,scheduled_ms,dispatched_ms,sent_ms,finished_ms,ttft_ms,e2el_ms,input_tokens,output_tokens,chunks,"
      "outcome,tpot_ms,itl_ms,turn,traceparent\n",
      next_page);
}

// GET /v1/sweeps/{id}/requests.json?step=N: one step's requests as vLLM's benchmark result
// file lists them (per request, in request order): input_lens, output_lens, ttfts and itls
// in seconds measured from the send as vLLM measures them, errors ("" for a success), beside
// the step's summary. itls lists one gap per generated token (a k-token chunk: k gaps of its
// gap / k); vLLM lists one per chunk, the same when each chunk carries one token.
Answer get_requests_json(Env& env, const Call& c) {
  constexpr std::size_t kMaxRequests = 200'000;
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  auto it = c.query.find("step");
  int step = -1;
  if (it != c.query.end()) {
    try {
      std::size_t used = 0;
      step = std::stoi(it->second, &used);
      if (used != it->second.size()) step = -1;
    } catch (const std::exception&) {
      step = -1;
    }
  }
  if (step < 0)
    return api_error(errc::invalid_argument, "step must be given as a stored step's index, e.g. ?step=2", "/step");
  const auto steps = env.ctx.store->steps(c.id);
  const auto s = std::find_if(steps.begin(), steps.end(), [&](const store::StepRow& r) { return r.index == step; });
  if (s == steps.end())
    return api_error(errc::not_found, fmt::format("sweep {} has no stored step {}", c.id, step), "/step");
  const auto requests = env.ctx.store->step_requests(c.id, step, kMaxRequests + 1);
  if (requests.size() > kMaxRequests) {
    return api_error(
        errc::payload_too_large,
        fmt::format("step {} has more than {} requests: read requests.csv, which streams", step, kMaxRequests),
        "/step");
  }
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(), itls = json::array(),
       errors = json::array();
  for (const auto& r : requests) {
    const bool ok = r.outcome == "ok";
    input_lens.push_back(r.input_tokens);
    output_lens.push_back(ok ? r.output_tokens : 0);
    // TTFT from the send: (first token - scheduled) - (sent - scheduled).
    ttfts.push_back(ok && r.ttft_ms && r.sent_ms ? (*r.ttft_ms - (*r.sent_ms - r.scheduled_ms)) / 1000 : 0.0);
    json gaps = json::array();
    std::istringstream in(r.itl_ms);
    for (double g; in >> g;) gaps.push_back(g / 1000);
    itls.push_back(std::move(gaps));
    errors.push_back(ok ? std::string() : r.outcome);
  }
  const json& summary = s->summary;
  json out{{"id", c.id},
           {"step", step},
           {"phase", s->phase},
           {"model_id", json_at(json_at(row->spec, "target"), "model")},
           {"request_rate", s->offered_rate_rps ? json(*s->offered_rate_rps) : json("inf")},
           {"num_prompts", requests.size()},
           {"input_lens", std::move(input_lens)},
           {"output_lens", std::move(output_lens)},
           {"ttfts", std::move(ttfts)},
           {"itls", std::move(itls)},
           {"errors", std::move(errors)}};
  // vLLM's summary keys, as the step stored them.
  for (const auto& [k, v] : summary.items()) {
    if (!out.contains(k)) out[k] = v;
  }
  return json_ok(c.req, bhttp::status::ok, out);
}

// GET /v1/sweeps/{id}/quality.jsonl: one JSON line per quality item a regression job asked,
// with its side and pass, what came back and each check's verdict, streamed a page at a time.
asio::awaitable<http::Reply> stream_quality_jsonl(Env& env, asio::any_io_executor pool, const Call& c,
                                                  beast::tcp_stream& stream) {
  constexpr std::size_t kPage = 500;
  std::map<int, store::StepRow> steps;  // the quality steps, read with the first page
  std::optional<store::Store::ItemKey> after;
  auto next_page = [&](std::string& text) {
    if (!after) {
      for (auto& s : env.ctx.store->steps(c.id)) {
        if (s.kind == "quality") steps.emplace(s.index, std::move(s));
      }
    }
    const auto page = env.ctx.store->quality_page(c.id, after, kPage);
    for (const auto& [step, it] : page) {
      const auto s = steps.find(step);
      const json line{{"step", step},
                      {"role", s != steps.end() ? json(s->second.role) : json(nullptr)},
                      {"pass", s != steps.end() && s->second.round ? json(*s->second.round) : json(nullptr)},
                      {"item", it.item},
                      {"entry", it.entry},
                      {"outcome", it.outcome},
                      {"finish_reason", it.finish_reason.empty() ? json(nullptr) : json(it.finish_reason)},
                      {"completion_tokens", it.completion_tokens ? json(*it.completion_tokens) : json(nullptr)},
                      {"max_tokens", it.max_tokens},
                      {"answer", it.answer},
                      {"tool_calls", it.tool_calls},
                      {"verdicts", it.verdicts},
                      {"judge_score", it.score ? json(*it.score) : json(nullptr)}};
      text += line.dump(-1, ' ', false, json::error_handler_t::replace);
      text += '\n';
    }
    if (page.size() < kPage) return false;
    after = store::Store::ItemKey{page.back().first, page.back().second.item};
    return true;
  };
  co_return co_await stream_pages(env, pool, c, stream, "application/x-ndjson; charset=utf-8", c.id + "-quality.jsonl",
                                  std::string(), next_page);
}

// GET /v1/sweeps/{id}/windows: a scenario's windows as stored (each window's figures, replica
// counts, readiness and events).
Answer get_windows(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  json windows = json::array();
  for (auto& w : env.ctx.store->windows(c.id)) {
    w.erase("ttft_histogram");  // for pooling inside the service; not for readers
    windows.push_back(std::move(w));
  }
  return json_ok(c.req, bhttp::status::ok, {{"id", c.id}, {"status", row->status}, {"windows", std::move(windows)}});
}

// GET /v1/sweeps/{id}/windows.csv: one line per window.
Answer get_windows_csv(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  static const std::array<const char*, 20> kColumns{
      "index",       "t_start_s", "offered_rps", "scheduled",   "sent",        "completed",   "good",
      "goodput_rps", "in_flight", "p50_ttft_ms", "p95_ttft_ms", "p99_ttft_ms", "max_ttft_ms", "p95_itl_ms",
      "rejected",    "cut",       "ready",       "desired",     "serving",     "readiness"};
  std::string csv;
  for (const char* k : kColumns) csv += std::string(csv.empty() ? "" : ",") + k;
  csv += ",errors,events\n";
  for (const auto& w : env.ctx.store->windows(c.id)) {
    std::string line;
    for (const char* k : kColumns) {
      const json& v = json_at(w, k);
      line += line.empty() ? "" : ",";
      if (v.is_number()) line += fmt::format("{:.4g}", v.get<double>());
      if (v.is_boolean()) line += v.get<bool>() ? "1" : "0";
    }
    std::uint64_t errors = 0;
    for (const auto& [kind, n] : json_at(w, "errors").items()) errors += n.is_number() ? n.get<std::uint64_t>() : 0;
    std::string events;
    for (const auto& e : json_at(w, "events"))
      events += (events.empty() ? "" : " ") + printable_ascii(e.value("kind", ""), 40);
    csv += line + fmt::format(",{},{}\n", errors, events);
  }
  return text_response(c.req, "text/csv; charset=utf-8", std::move(csv), c.id + "-windows.csv");
}

// GET /v1/sweeps/{id}/autoscale?format=keda|hpa|json&u=&base_rps=&peak_rps=&cold_start_s=
//     &model=&namespace=&deployment=&prometheus=: thresholds derived from the result.
Answer get_autoscale(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  report::AutoscaleOptions o;
  std::string format = "keda";
  for (const auto& [key, value] : c.query) {
    auto number = [&](std::optional<double>& out) -> std::optional<ApiError> {
      try {
        std::size_t used = 0;
        out = std::stod(value, &used);
        if (used != value.size()) throw std::invalid_argument(key);
      } catch (const std::exception&) {
        return api_error(errc::invalid_argument, key + " must be a number", "/" + key);
      }
      return std::nullopt;
    };
    std::optional<ApiError> e;
    if (key == "format")
      format = value;
    else if (key == "u") {
      std::optional<double> u;
      e = number(u);
      if (u) o.utilization = *u;
    } else if (key == "base_rps")
      e = number(o.base_rps);
    else if (key == "peak_rps")
      e = number(o.peak_rps);
    else if (key == "cold_start_s")
      e = number(o.cold_start_s);
    else if (key == "model")
      o.model = value;
    else if (key == "namespace")
      o.ns = value;
    else if (key == "deployment")
      o.deployment = value;
    else if (key == "prometheus")
      o.prometheus = value;
    else
      e = api_error(errc::invalid_argument, "unknown parameter '" + key + "'", "/" + key);
    if (e) return *e;
  }
  if (format != "keda" && format != "hpa" && format != "json") {
    return api_error(errc::invalid_argument, "format must be keda, hpa or json", "/format");
  }
  auto plan = report::plan_autoscale(sweep_view(env, *row), o);
  if (!plan) return from_error(plan.error());
  if (format == "json") return json_ok(c.req, bhttp::status::ok, report::autoscale_json(*plan));
  return text_response(c.req, "application/yaml; charset=utf-8",
                       format == "keda" ? report::keda_yaml(*plan) : report::hpa_yaml(*plan));
}

}  // namespace capsweep::api

// Handlers of the sweeps resource: create, list, read, delete, steps, cancel.

#include <fmt/format.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "api/admission.hpp"
#include "api/guard.hpp"
#include "api/handlers.hpp"
#include "core/json_access.hpp"
#include "llm/target.hpp"
#include "llm/workload.hpp"
#include "sweep/kinds.hpp"
#include "sweep/quality_pass.hpp"
#include "sweep/spec.hpp"

namespace capsweep::api {

namespace {

using json = nlohmann::json;

std::string new_sweep_id() {
  std::array<unsigned char, 8> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) throw std::runtime_error("no randomness");
  std::string id = "sw-";
  for (unsigned char b : bytes) id += fmt::format("{:02x}", b);
  return id;
}

ApiError over(std::string field, std::string what) {
  return api_error(errc::invalid_argument, std::move(what), std::move(field));
}

// Parses, validates and completes a spec document; the document is updated with defaults.
Result<sweep::JobSpec> accepted_spec(Env& env, json& doc) {
  if (auto ok = env.spec_validator.validate(doc); !ok) return ok.error();
  if (auto e = llm::check_dataset_workload(doc.value("workload", json::object()))) return *e;
  sweep::complete_arrival(doc);
  env.spec_validator.apply_defaults(doc);
  // With a dataset, the synthesiser's settings do not apply: the record does not show them.
  if (doc.contains("workload") && doc["workload"].contains("dataset")) {
    doc["workload"].erase("prompt_tokens");
    doc["workload"].erase("shared_prefix_tokens");
  }
  if (auto e = resolve_dataset_lengths(env, doc)) return *e;
  if (doc.value("kind", "sweep") == "sweep" && !doc.contains("sweep")) {
    doc["sweep"] = json::object();
    env.spec_validator.apply_defaults(doc);
  }
  return sweep::parse_job_spec(doc);
}

// A trace's replay and its dataset: a trace replayed with "process": "trace" and nothing else;
// a cold cache salts a trace's blocks and nothing of another dataset; the replay within the
// service's limits on rate and requests per step.
std::optional<ApiError> check_trace_dataset(Env& env, const sweep::JobSpec& spec, const store::DatasetRow& row) {
  const bool trace_rows = row.format == llm::to_string(llm::DatasetFormat::trace);
  const bool replay = spec.arrival.process == ArrivalProcess::trace;
  if (trace_rows != replay) {
    return replay ? over("/workload/dataset/id", fmt::format("dataset {} is {}, not a trace (upload it with "
                                                             "format=trace)",
                                                             row.id, row.format))
                  : over("/arrival/process",
                         fmt::format("dataset {} is a trace: replay it with \"process\": \"trace\"", row.id));
  }
  if (!trace_rows && spec.workload.prefix.cache != llm::PrefixCache::as_found) {
    return over("/workload/prefix/cache",
                "a dataset's prompts are its own text: a cold or warm cache needs "
                "synthesised prompts or a trace's blocks");
  }
  if (!replay) return std::nullopt;
  auto content = env.ctx.store->dataset_content(row.id);
  auto rows = content ? llm::parse_trace(*content) : Result<std::vector<llm::DatasetEntry>>(Error{});
  if (!rows) return over("/workload/dataset/id", fmt::format("dataset {} no longer parses as a trace", row.id));
  llm::Workload w(spec.workload, llm::PromptSynth(1.0), std::move(*rows));
  const bool check = spec.kind == sweep::JobKind::check;
  if (!sweep::trace_at_own_rate(spec)) {
    // The job sets the rate (held to the limits by its kind); the trace must loop to be scaled.
    if (trace_rate(w.trace_offsets()) > 0) return std::nullopt;
    return over("/workload/dataset/id", fmt::format("dataset {}'s rows all share one time: a trace with no rate of its "
                                                    "own replays in a check, not scaled to a {}'s rates",
                                                    row.id, sweep::rules(spec.kind).name));
  }
  const ScheduleLimit limit = check ? ScheduleLimit{spec.check.warmup + spec.check.duration, spec.check.requests}
                                    : ScheduleLimit{spec.regression.warmup + spec.regression.duration, std::nullopt};
  auto replayed = replay_schedule(w.trace_offsets(), spec.arrival.speed, spec.arrival.loop, limit);
  if (!replayed) return from_error(replayed.error());
  const Limits& l = env.ctx.config->limits;
  if (replayed->send_times.size() > l.max_requests_per_step) {
    return over("/arrival/speed", fmt::format("the replay would send {} requests in the step; the service's limit "
                                              "is {} per step",
                                              replayed->send_times.size(), l.max_requests_per_step));
  }
  if (replayed->spec.rate_rps > l.max_rate_rps) {
    return over("/arrival/speed", fmt::format("the replay offers {:.0f} req/s; the service's limit is {} req/s",
                                              replayed->spec.rate_rps, l.max_rate_rps));
  }
  return std::nullopt;
}

// A dataset the spec names: stored, matching a pinned sha256, within the service's length
// limits. Records its sha256 in the stored spec, so the job's record names the exact content.
std::optional<ApiError> check_dataset(Env& env, const sweep::JobSpec& spec, json& doc) {
  if (!spec.workload.dataset) return std::nullopt;
  const llm::DatasetRef& ref = *spec.workload.dataset;
  auto row = env.ctx.store->dataset(ref.id);
  if (!row) {
    return over("/workload/dataset/id", fmt::format("no dataset {} is stored (POST /v1/datasets first)", ref.id));
  }
  if (!ref.sha256.empty() && ref.sha256 != row->sha256) {
    return over("/workload/dataset/sha256", fmt::format("dataset {} has sha256 {}", ref.id, row->sha256));
  }
  const Limits& l = env.ctx.config->limits;
  const double prompt_max = row->stats.value("/prompt_tokens/max"_json_pointer, 0.0);
  if (prompt_max > l.max_prompt_tokens) {
    return over("/workload/dataset/id",
                fmt::format("the dataset has prompts of {} words; the service's limit is {} tokens", prompt_max,
                            l.max_prompt_tokens));
  }
  const json out_max = row->stats.value("/output_tokens/max"_json_pointer, json(nullptr));
  if (ref.output_from_dataset && out_max.is_number() && out_max.get<double>() > l.max_output_tokens) {
    return over("/workload/dataset/output_tokens",
                fmt::format("the dataset asks for up to {} output tokens; the service's limit is {}",
                            out_max.get<double>(), l.max_output_tokens));
  }
  if (auto e = check_trace_dataset(env, spec, *row)) return e;
  doc["workload"]["dataset"]["sha256"] = row->sha256;
  return std::nullopt;
}

// regression.from_sweep: the rate is the named sweep's max_slo_rate_rps, written into the
// stored spec (409 while that sweep has none: unknown, unfinished, or no rate met its SLO).
std::optional<ApiError> resolve_from_sweep(Env& env, sweep::JobSpec& spec, json& doc) {
  const bool regression = spec.kind == sweep::JobKind::regression && !spec.regression.from_sweep.empty();
  const bool scenario = spec.kind == sweep::JobKind::scenario && !spec.scenario->from_sweep.empty();
  if (!regression && !scenario) return std::nullopt;
  const std::string& from = regression ? spec.regression.from_sweep : spec.scenario->from_sweep;
  const std::string field = regression ? "/regression/from_sweep" : "/scenario/from_sweep";
  auto row = env.ctx.store->sweep(from);
  if (!row) return api_error(errc::conflict, fmt::format("no sweep '{}'", from), field);
  if (row->kind != "sweep" || row->status != "succeeded") {
    return api_error(
        errc::conflict,
        fmt::format("sweep '{}' is a {} job, {}: only a succeeded sweep gives a rate", row->id, row->kind, row->status),
        field);
  }
  const json rate = json_at(row->result, "max_slo_rate_rps");
  if (!rate.is_number() || !(rate.get<double>() > 0)) {
    return api_error(errc::conflict, fmt::format("sweep '{}' found no rate that met its SLO", row->id), field);
  }
  if (regression) {
    spec.regression.rate_rps = rate.get<double>();
    doc["regression"]["rate_rps"] = spec.regression.rate_rps;
    return std::nullopt;
  }
  spec.scenario->capacity_rps = rate.get<double>();
  doc["scenario"]["capacity_rps"] = *spec.scenario->capacity_rps;
  if (auto p = sweep::scenario_profile(*spec.scenario); !p) return from_error(p.error());
  return std::nullopt;
}

// quality.dataset: stored, matching a pinned sha256, with items for every check asked; its
// sha256 is written into the stored spec.
std::optional<ApiError> check_quality_dataset(Env& env, sweep::JobSpec& spec, json& doc) {
  if (!spec.quality) return std::nullopt;
  llm::DatasetRef& ref = spec.quality->dataset;
  auto row = env.ctx.store->dataset(ref.id);
  if (!row) return over("/quality/dataset", fmt::format("no dataset {} is stored (POST /v1/datasets first)", ref.id));
  if (!ref.sha256.empty() && ref.sha256 != row->sha256) {
    return over("/quality/dataset/sha256", fmt::format("dataset {} has sha256 {}", ref.id, row->sha256));
  }
  auto content = env.ctx.store->dataset_content(ref.id);
  auto parsed =
      content ? llm::parse_dataset(llm::parse_dataset_format(row->format).value_or(llm::DatasetFormat::jsonl), *content)
              : Result<llm::Dataset>(Error{errc::not_found, "the dataset's content is gone", ""});
  if (!parsed) return over("/quality/dataset", fmt::format("dataset {}: {}", ref.id, parsed.error().message));
  const std::size_t asked = sweep::quality_item_count(*spec.quality, parsed->entries.size());
  if (asked > env.ctx.config->limits.max_quality_items) {
    return over("/quality/max_items",
                fmt::format("a pass would ask {} items; the service's limit is {} (set quality.max_items)", asked,
                            env.ctx.config->limits.max_quality_items));
  }
  if (auto e = sweep::quality_items_problem(*spec.quality, parsed->entries, spec.judge.has_value())) {
    return from_error(*e);
  }
  ref.sha256 = row->sha256;
  doc["quality"]["dataset"] = {{"id", ref.id}, {"sha256", ref.sha256}};
  return std::nullopt;
}

}  // namespace

json sweep_view(const Env& env, const store::SweepRow& row) {
  json progress;
  if (row.status == "running") {
    if (auto live = env.ctx.manager->live_progress(row.id)) progress = *live;
  }
  if (progress.is_null()) {
    progress = row.progress.is_object() ? row.progress : json::object();
    if (row.status == "queued")
      progress = {{"phase", "queued"}, {"step", 0}, {"steps_planned", nullptr}, {"percent", 0}};
    if (row.status == "succeeded") {
      progress["phase"] = "done";
      progress["percent"] = 100;
      progress["eta_s"] = 0;
    }
    for (const char* k : {"phase", "step", "steps_planned", "percent"}) {
      if (!progress.contains(k)) progress[k] = nullptr;
    }
  }
  return {{"id", row.id},
          {"name", row.name},
          {"kind", row.kind},
          {"status", row.status},
          {"created_at", row.created_at},
          {"started_at", row.started_at.empty() ? json(nullptr) : json(row.started_at)},
          {"finished_at", row.finished_at.empty() ? json(nullptr) : json(row.finished_at)},
          {"updated_at", row.updated_at},
          {"progress", progress},
          {"result", row.result},
          {"error", row.error.empty() ? json(nullptr) : json(row.error)},
          {"resumable", row.resumable},
          {"spec", row.spec}};
}

json steps_view(const Env& env, const std::string& id) {
  json steps = json::array();
  for (const auto& s : env.ctx.store->steps(id)) {
    steps.push_back({{"index", s.index},
                     {"kind", s.kind},
                     {"phase", s.phase},
                     {"offered_rate_rps", s.offered_rate_rps ? json(*s.offered_rate_rps) : json(nullptr)},
                     {"verdict", s.verdict},
                     {"generator_limited", s.generator_limited},
                     {"summary", s.summary},
                     {"evaluation", s.evaluation},
                     {"server", s.server},
                     {"role", s.role.empty() ? json(nullptr) : json(s.role)},
                     {"round", s.round ? json(*s.round) : json(nullptr)},
                     {"started_at", s.started_at},
                     {"finished_at", s.finished_at}});
  }
  return steps;
}

ApiError no_sweep(const Call& c) {
  return api_error(errc::not_found, fmt::format("no sweep '{}'", c.id), "id");
}

// POST /v1/sweeps: bound the body's nesting, validate the spec, fill defaults, check limits,
// CA file and allow-list, queue it.
namespace {

// The body as a JSON document: nesting within the limit, valid JSON, and no field given two
// ways (a rate or capacity given and taken from a sweep).
Result<json> spec_document(const ServiceConfig& config, const Request& req) {
  if (auto deep = json_too_deep(req.body(), config.limits.max_json_depth)) {
    return invalid(*deep,
                   fmt::format("nested deeper than the service's limit of {} levels", config.limits.max_json_depth));
  }
  json doc = json::parse(req.body(), nullptr, false);
  if (doc.is_discarded()) return Error{errc::parse_error, "the body is not valid JSON", ""};
  const json regression = json_at(doc, "regression");
  if (regression.is_object() && regression.contains("rate_rps") && regression.contains("from_sweep")) {
    return invalid("/regression/rate_rps",
                   "give the request rate (rate_rps) or a sweep to take it from (from_sweep), not both");
  }
  const json scenario = json_at(doc, "scenario");
  if (scenario.is_object() && scenario.contains("capacity_rps") && scenario.contains("from_sweep")) {
    return invalid("/scenario/capacity_rps",
                   "give the capacity (capacity_rps) or a sweep to take it from (from_sweep), not both");
  }
  return Result<json>(boost::system::in_place_value, std::move(doc));
}

// What the service checks of a parsed spec before it is queued: the allow-list, CA files, the
// service's limits, the datasets it names, a capacity taken from a stored sweep, the queue's
// room and the database's.
std::optional<ApiError> admit(Env& env, sweep::JobSpec& spec, json& doc) {
  const ServiceConfig& config = *env.ctx.config;
  if (auto e = check_allow_list(config, spec)) return e;
  if (auto e = check_ca_files(config, spec)) return e;
  if (auto e = check_limits(config, spec, doc)) return e;
  if (auto e = check_dataset(env, spec, doc)) return e;
  if (auto e = resolve_from_sweep(env, spec, doc)) return e;
  if (spec.kind == sweep::JobKind::scenario) {
    if (auto e = check_scenario_limits(config, spec)) return e;  // with the capacity resolved
  }
  if (auto e = check_quality_dataset(env, spec, doc)) return e;
  if (env.ctx.store->count_status("queued") >= config.limits.max_queued_sweeps) {
    return api_error(
        errc::too_many_requests,
        fmt::format("{} sweeps are queued already (limits.max_queued_sweeps)", config.limits.max_queued_sweeps), "",
        "queue_full");
  }
  if (!env.ctx.store->writable()) {
    return api_error(errc::unavailable, "the database cannot be written now (disk full or locked); nothing was stored");
  }
  return std::nullopt;
}

}  // namespace

Answer create_sweep(Env& env, const Call& c) {
  auto reject = [&env](ApiError e) {
    ++env.sweeps_rejected;
    return e;
  };
  auto doc = spec_document(*env.ctx.config, c.req);
  if (!doc) return reject(from_error(doc.error()));
  auto spec = accepted_spec(env, *doc);
  if (!spec) return reject(from_error(spec.error()));
  if (auto e = admit(env, *spec, *doc)) return reject(*e);
  auto split = sweep::split_secrets(*doc);
  store::SweepRow row;
  row.id = new_sweep_id();
  row.name = spec->name;
  row.kind = std::string(sweep::to_string(spec->kind));
  row.target_key = spec->base_url;
  row.status = "queued";
  row.spec = split.visible;
  row.secret_headers = split.secret_headers;
  row.created_at = store::utc_now();
  env.ctx.store->insert_sweep(row);
  ++env.sweeps_created;
  env.ctx.manager->notify();
  row.updated_at = row.created_at;  // the answer shows it as queued, whatever a worker does next
  Response res = json_ok(c.req, bhttp::status::created, sweep_view(env, row));
  res.set(bhttp::field::location, "/v1/sweeps/" + row.id);
  return res;
}

// GET /v1/sweeps?status=&limit=&offset=: newest first.
Answer list_sweeps(Env& env, const Call& c) {
  std::optional<std::string> status;
  if (auto it = c.query.find("status"); it != c.query.end()) {
    static const std::array<std::string_view, 5> known{"queued", "running", "succeeded", "failed", "cancelled"};
    if (std::find(known.begin(), known.end(), it->second) == known.end()) {
      return api_error(errc::invalid_argument, "status must be queued, running, succeeded, failed or cancelled",
                       "status");
    }
    status = it->second;
  }
  auto int_param = [&](const char* key, int fallback, int lo, int hi) -> std::optional<int> {
    auto it = c.query.find(key);
    if (it == c.query.end()) return fallback;
    try {
      std::size_t used = 0;
      const int v = std::stoi(it->second, &used);
      if (used != it->second.size() || v < lo || v > hi) return std::nullopt;
      return v;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  const auto limit = int_param("limit", 50, 1, 1000);
  if (!limit) return api_error(errc::invalid_argument, "limit must be an integer in [1, 1000]", "limit");
  const auto offset = int_param("offset", 0, 0, 1'000'000'000);
  if (!offset) return api_error(errc::invalid_argument, "offset must be a non-negative integer", "offset");
  json items = json::array();
  for (const auto& row : env.ctx.store->list_sweeps(status, *limit, *offset)) {
    json v = sweep_view(env, row);
    // What the target is (target.labels) stays in the list; the rest of the spec does not.
    v["labels"] =
        json_at(json_at(row.spec, "target"), "labels").is_object() ? row.spec["target"]["labels"] : json::object();
    v.erase("spec");
    items.push_back(std::move(v));
  }
  return json_ok(c.req, bhttp::status::ok, {{"sweeps", items}, {"limit", *limit}, {"offset", *offset}});
}

// GET /v1/sweeps/{id}: status, progress (phase, step i of planned, percent, ETA), result.
Answer get_sweep(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  return json_ok(c.req, bhttp::status::ok, sweep_view(env, *row));
}

// DELETE /v1/sweeps/{id}: refused while running.
Answer delete_sweep(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  if (row->status == "running" || !env.ctx.store->delete_sweep(c.id)) {
    return api_error(errc::conflict, "the sweep is running: cancel it first", "id");
  }
  return no_content(c.req);
}

// GET /v1/sweeps/{id}/steps: every stored step with its summary.
Answer get_steps(Env& env, const Call& c) {
  auto row = env.ctx.store->sweep(c.id);
  if (!row) return no_sweep(c);
  return json_ok(c.req, bhttp::status::ok, {{"id", c.id}, {"status", row->status}, {"steps", steps_view(env, c.id)}});
}

// POST /v1/sweeps/{id}/cancel: stops it; stored steps stay.
Answer cancel_sweep(Env& env, const Call& c) {
  switch (env.ctx.manager->cancel(c.id)) {
    case sweep::CancelOutcome::not_found:
      return no_sweep(c);
    case sweep::CancelOutcome::already_finished: {
      auto row = env.ctx.store->sweep(c.id);
      return api_error(errc::conflict, fmt::format("the sweep already ended ({})", row ? row->status : "deleted"),
                       "id");
    }
    case sweep::CancelOutcome::cancelled:
    case sweep::CancelOutcome::stopping:
      break;
  }
  auto row = env.ctx.store->sweep(c.id);
  return json_ok(c.req, bhttp::status::accepted, {{"id", c.id}, {"status", row ? row->status : "cancelled"}});
}

}  // namespace capsweep::api

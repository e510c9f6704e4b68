#include "loadgen/load_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace capsweep::loadgen {

using json = nlohmann::json;

namespace {

constexpr std::array<std::pair<StepShape, std::string_view>, 5> kShapes{{{StepShape::one_by_one, "one_by_one"},
                                                                         {StepShape::burst, "burst"},
                                                                         {StepShape::arrivals, "arrivals"},
                                                                         {StepShape::users, "users"},
                                                                         {StepShape::profile, "profile"}}};

// A count-based step's bound: its requests' time out, or ten minutes, whichever is longer.
Nanos count_bound(const LoadSettings& s) {
  return std::max<Nanos>(std::chrono::seconds(600), s.request_timeout);
}

// An arrivals step: at its rate for its length, all at once, or a trace's own.
void plan_arrivals(const LoadSettings& s, StepSpec& out) {
  out.arrival = s.arrival;
  out.concurrency = s.concurrency;
  out.warmup = s.warmup;
  out.requests = s.requests;
  if (s.arrival.process == ArrivalProcess::all_at_once) {
    out.duration = count_bound(s);
    return;
  }
  out.arrival.rate_rps = s.rate_rps;
  out.duration = s.warmup + s.duration;
  out.decide = s.decide;
}

// The step's mode, arrivals and limits by its shape.
void plan_shape(const LoadSettings& s, StepSpec& out) {
  switch (s.shape) {
    case StepShape::one_by_one:
      out.mode = Mode::concurrency;
      out.concurrency = 1;
      out.requests = s.requests;
      out.duration = count_bound(s) * static_cast<long>(std::min<std::uint64_t>(s.requests.value_or(1), 1000));
      return;
    case StepShape::burst:
      out.arrival.process = ArrivalProcess::all_at_once;
      out.requests = s.requests;
      out.concurrency = s.concurrency;
      out.duration = count_bound(s);
      return;
    case StepShape::users:
      out.mode = Mode::concurrency;
      out.arrival = s.arrival;
      out.concurrency = s.concurrency;
      out.warmup = s.warmup;
      out.think_time_ms = s.think_time_ms;
      out.duration = s.warmup + s.duration;
      out.requests = s.requests;
      return;
    case StepShape::arrivals:
    case StepShape::profile:
      plan_arrivals(s, out);
      return;
  }
}

// A trace's arrivals as this step sends them: scaled to its rate and looped (a sweep's step, a
// regression's rate), or replayed at arrival.speed, looped or cut as arrival.loop says.
Result<Schedule> replay(const LoadSettings& s, const StepSpec& ss, const std::vector<Nanos>& offsets) {
  const ScheduleLimit limit{ss.duration, ss.requests};
  if (s.rate_rps > 0 && std::isfinite(s.rate_rps)) return replay_at_rate(offsets, s.rate_rps, limit);
  return replay_schedule(offsets, s.arrival.speed, s.arrival.loop, limit);
}

}  // namespace

std::string_view to_string(StepShape s) noexcept {
  for (const auto& [shape, name] : kShapes) {
    if (shape == s) return name;
  }
  return "arrivals";
}

std::optional<StepShape> parse_step_shape(std::string_view s) noexcept {
  for (const auto& [shape, name] : kShapes) {
    if (name == s) return shape;
  }
  return std::nullopt;
}

Result<StepSpec> plan_load_step(const LoadSettings& s, const std::vector<Nanos>& trace_offsets) {
  StepSpec ss;
  ss.seed = s.seed * 1'000'003ULL + s.draw;
  ss.trace_id = s.trace_id;
  ss.request_index_base = s.draw << 32;
  ss.goodput = s.goodput;
  ss.drain_timeout = s.drain_timeout;
  ss.metrics_url = s.metrics_url;
  ss.prometheus = s.prometheus;
  ss.engine_threads = s.engine_threads;
  plan_shape(s, ss);
  if (s.shape == StepShape::arrivals && ss.arrival.process == ArrivalProcess::trace) {
    auto replayed = replay(s, ss, trace_offsets);
    if (!replayed)
      return Error{errc::invalid_argument, "the trace cannot be replayed: " + replayed.error().message, ""};
    ss.schedule = std::make_shared<const Schedule>(std::move(*replayed));
  }
  if (s.prefix_cache != llm::PrefixCache::as_found) {
    ss.prompt_salt = llm::prompt_salt(s.job_id, ss.request_index_base);
    ss.warm_prefixes = s.prefix_cache == llm::PrefixCache::warm;
  }
  if (s.max_connections > 0 && (ss.concurrency == 0 || ss.concurrency > s.max_connections)) {
    ss.concurrency = s.max_connections;
  }
  return ss;
}

}  // namespace capsweep::loadgen

namespace capsweep::loadgen {

namespace {

// A GoodputBounds' members by name, for the wire.
constexpr std::array<std::pair<std::string_view, std::optional<Nanos> GoodputBounds::*>, 5> kGoodput{
    {{"ttft_ns", &GoodputBounds::ttft},
     {"tpot_ns", &GoodputBounds::tpot},
     {"e2el_ns", &GoodputBounds::e2el},
     {"ttft_sent_ns", &GoodputBounds::ttft_sent},
     {"e2el_sent_ns", &GoodputBounds::e2el_sent}}};

json arrival_json(const ArrivalSpec& a) {
  return {{"process", std::string(to_string(a.process))},
          {"rate_rps", a.rate_rps},
          {"burstiness", a.burstiness},
          {"speed", a.speed},
          {"loop", a.loop}};
}

json goodput_json(const GoodputBounds& g) {
  json j = json::object();
  for (const auto& [name, member] : kGoodput) {
    if (g.*member) j[std::string(name)] = (g.*member)->count();
  }
  return j;
}

// A member that is not what it must be (a count below 0, say), thrown as json::exception is.
struct NotWhole {};

// Reads the settings' members; a member missing or of the wrong type throws, and the caller
// reports it against the field read last.
struct SettingsReader {
  const json& j;
  std::string field;  // the member read now, for the error

  const json& at(const char* name) {
    field = std::string("/payload/load/") + name;
    return j.at(name);
  }
  Nanos nanos(const char* name) { return Nanos(at(name).get<std::int64_t>()); }
  template <class T>
  T whole(const json& v) const {
    if (!v.is_number_unsigned() || v.get<std::uint64_t>() > std::numeric_limits<T>::max()) throw NotWhole{};
    return static_cast<T>(v.get<std::uint64_t>());
  }
  template <class T>
  T whole(const char* name) {
    return whole<T>(at(name));
  }
};

Result<ArrivalSpec> read_arrival(SettingsReader& r) {
  const json& a = r.at("arrival");
  ArrivalSpec out;
  auto process = parse_arrival_process(a.at("process").get<std::string>(), r.field + "/process");
  if (!process) return process.error();
  out.process = *process;
  out.rate_rps = a.at("rate_rps").get<double>();
  out.burstiness = a.at("burstiness").get<double>();
  out.speed = a.at("speed").get<double>();
  out.loop = a.at("loop").get<bool>();
  return out;
}

std::optional<Error> read_optionals(SettingsReader& r, LoadSettings& s) {
  if (const json& n = r.at("requests"); !n.is_null()) s.requests = r.whole<std::uint64_t>(n);
  if (const json& t = r.at("think_time_ms"); !t.is_null()) {
    auto dist = parse_length_dist(t, r.field);
    if (!dist) return dist.error();
    s.think_time_ms = *dist;
  }
  const json& g = r.at("goodput");
  for (const auto& [name, member] : kGoodput) {
    if (auto it = g.find(name); it != g.end()) s.goodput.*member = Nanos(it->get<std::int64_t>());
  }
  const std::string cache = r.at("prefix_cache").get<std::string>();
  if (cache == "cold") {
    s.prefix_cache = llm::PrefixCache::cold;
  } else if (cache == "warm") {
    s.prefix_cache = llm::PrefixCache::warm;
  } else if (cache != "as_found") {
    return invalid(r.field, "as_found, cold or warm");
  }
  return std::nullopt;
}

// "trace_id": absent or null (no trace), else the step's trace id; nullopt when absent,
// an empty optional inside when it is not an id.
std::optional<std::optional<TraceId>> j_trace_id(SettingsReader& r) {
  const auto it = r.j.find("trace_id");
  if (it == r.j.end() || it->is_null()) return std::nullopt;
  r.field = "/payload/load/trace_id";
  if (!it->is_string()) return std::optional<TraceId>();
  return parse_trace_id(it->get<std::string>());
}

Result<LoadSettings> read_settings(SettingsReader& r) {
  LoadSettings s;
  const auto shape = parse_step_shape(r.at("shape").get<std::string>());
  if (!shape) return invalid(r.field, "one_by_one, burst, arrivals, users or profile");
  s.shape = *shape;
  auto arrival = read_arrival(r);
  if (!arrival) return arrival.error();
  s.arrival = *arrival;
  const json& rate = r.at("rate_rps");
  s.rate_rps = rate.is_string() && rate == "inf" ? INFINITY : rate.get<double>();
  s.duration = r.nanos("duration_ns");
  s.warmup = r.nanos("warmup_ns");
  s.concurrency = r.whole<std::uint32_t>("concurrency");
  s.seed = r.whole<std::uint64_t>("seed");
  s.draw = r.whole<std::uint64_t>("draw");
  s.request_timeout = r.nanos("request_timeout_ns");
  s.drain_timeout = r.nanos("drain_timeout_ns");
  s.job_id = r.at("job_id").get<std::string>();
  s.max_connections = r.whole<std::uint32_t>("max_connections");
  if (auto e = read_optionals(r, s)) return *e;
  if (const auto t = j_trace_id(r)) {
    if (!*t) return invalid(r.field, "32 lowercase hex digits, not all zeros");
    s.trace_id = **t;
  }
  return s;
}

}  // namespace

json to_json(const LoadSettings& s) {
  return {{"shape", std::string(to_string(s.shape))},
          {"arrival", arrival_json(s.arrival)},
          {"rate_rps", std::isfinite(s.rate_rps) ? json(s.rate_rps) : json("inf")},
          {"duration_ns", s.duration.count()},
          {"warmup_ns", s.warmup.count()},
          {"requests", s.requests ? json(*s.requests) : json(nullptr)},
          {"concurrency", s.concurrency},
          {"think_time_ms", s.think_time_ms ? s.think_time_ms->to_json() : json(nullptr)},
          {"seed", s.seed},
          {"draw", s.draw},
          {"request_timeout_ns", s.request_timeout.count()},
          {"drain_timeout_ns", s.drain_timeout.count()},
          {"goodput", goodput_json(s.goodput)},
          {"prefix_cache", std::string(llm::to_string(s.prefix_cache))},
          {"job_id", s.job_id},
          {"trace_id", s.trace_id.valid() ? json(s.trace_id.hex()) : json(nullptr)},
          {"max_connections", s.max_connections}};
}

Result<LoadSettings> parse_load_settings(const json& j) {
  if (!j.is_object()) return invalid("/payload/load", "the step's settings are an object");
  SettingsReader r{j, "/payload/load"};
  try {
    return read_settings(r);
  } catch (const json::exception& e) {
    return invalid(r.field, fmt::format("missing or of the wrong type: {}", e.what()));
  } catch (const NotWhole&) {
    return invalid(r.field, "a whole number of its range");
  }
}

json to_json(const AgentStep& s) {
  json j = {{"load", to_json(s.load)},
            {"target", s.target},
            {"workload", s.workload},
            {"tokens_per_word", s.tokens_per_word}};
  if (s.dataset) j["dataset"] = {{"format", s.dataset_format.value_or("jsonl")}, {"content", *s.dataset}};
  return j;
}

Result<AgentStep> parse_agent_step(const json& j) {
  if (!j.is_object()) return invalid("/payload", "the step's payload is an object");
  AgentStep s;
  auto load = parse_load_settings(j.value("load", json()));
  if (!load) return load.error();
  s.load = std::move(*load);
  const auto target = j.find("target");
  if (target == j.end() || !target->is_object()) return invalid("/payload/target", "the target is an object");
  s.target = *target;
  const auto workload = j.find("workload");
  if (workload == j.end() || !workload->is_object()) return invalid("/payload/workload", "the workload is an object");
  s.workload = *workload;
  const auto tpw = j.find("tokens_per_word");
  if (tpw == j.end() || !tpw->is_number() || !(tpw->get<double>() > 0)) {
    return invalid("/payload/tokens_per_word", "a number above 0");
  }
  s.tokens_per_word = tpw->get<double>();
  if (const auto d = j.find("dataset"); d != j.end()) {
    if (!d->is_object() || !d->contains("content") || !(*d)["content"].is_string()) {
      return invalid("/payload/dataset", "the dataset is {format, content}");
    }
    s.dataset = (*d)["content"].get<std::string>();
    s.dataset_format = d->value("format", "jsonl");
  }
  return s;
}

}  // namespace capsweep::loadgen

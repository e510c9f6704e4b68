#include "sweep/scenario_watch.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <map>

#include "core/error.hpp"
#include "core/text.hpp"
#include "llm/client.hpp"
#include "llm/target.hpp"
#include "observe/prom_query.hpp"
#include "observe/prometheus.hpp"
#include "store/store.hpp"
#include "sweep/scenario.hpp"

namespace capsweep::sweep {

namespace asio = boost::asio;
using json = nlohmann::json;

namespace {

// A plain HTTP(S) endpoint the watch reads: its client on the watch's io_context.
struct Source {
  std::unique_ptr<llm::Client> client;
  std::string path;
};

}  // namespace

struct ScenarioWatch::Impl {
  Impl(const JobSpec& s, const Profile& p, std::string sweep_id, store::Store& st, Options opts)
      : spec(s),
        profile(p),
        id(std::move(sweep_id)),
        store(st),
        o(std::move(opts)),
        acc(s.scenario->window, p.duration(), s.slo.goodput),
        readiness_window_s(s.scenario->checks.readiness ? std::optional<double>(s.scenario->checks.readiness->window_s)
                                                        : std::nullopt) {}

  const JobSpec& spec;
  const Profile& profile;
  std::string id;
  store::Store& store;
  Options o;

  std::mutex m;  // the accumulator and the first request: the load engine's thread and ours
  WindowAccumulator acc;
  EarliestRequests earliest;  // the readiness check's requests (none without the check)
  std::optional<double> readiness_window_s;
  std::optional<Nanos> first_scheduled;
  bool first_ended = false;

  std::mutex events_m;
  json events = json::array();

  std::atomic<bool> running{false};
  std::thread thread;
  SteadyClock::time_point origin{};
  asio::io_context io{1};
  std::optional<Source> readiness, metrics, prometheus;
  std::optional<bool> ready_state;
  std::map<std::string, double> counts;  // the replica counts last read
  std::map<int, json> readings;          // window index -> what was read at its end
  int next_reading = 0;

  double now_s() const { return to_s(SteadyClock::now() - origin); }

  void event(json e) {
    std::lock_guard lock(events_m);
    events.push_back(std::move(e));
  }

  std::optional<Source> source(const std::string& url, const char* default_path) {
    auto t = llm::parse_base_url(llm::Target{}, url, "");
    if (!t) return std::nullopt;
    Source s;
    s.path = t->base_path.empty() ? default_path : t->base_path;
    t->base_path.clear();
    t->allow_address = o.allow_address;
    t->max_response_bytes = o.max_response_bytes;
    t->connect_timeout = std::chrono::seconds(2);
    t->read_timeout = std::chrono::seconds(2);
    t->request_timeout = std::chrono::seconds(4);
    s.client = std::make_unique<llm::Client>(io.get_executor(), *t);
    return s;
  }

  llm::Client::PlainResponse get(Source& s, const std::string& path) {
    return s.client->request_now(io, "GET", path, "", "scenario: a watch request failed");
  }

  void open_sources() {
    const ScenarioSettings& sc = *spec.scenario;
    if (!sc.readiness_url.empty()) readiness = source(sc.readiness_url, "/");
    if (sc.replicas && sc.replicas->prometheus) prometheus = source(sc.replicas->prometheus->url, "");
    if (!spec.metrics_url.empty()) metrics = source(spec.metrics_url, "/metrics");
  }

  // The replica counts: {"ready": n, "desired": n, "serving": n} as far as they are read; an
  // error message when Prometheus rejects a query.
  std::pair<json, std::string> read_counts(const observe::Exposition* text) {
    json out = json::object();
    const auto& src = spec.scenario->replicas;
    if (!src) return {out, ""};
    if (src->prometheus && prometheus) {
      for (const auto& [name, promql] : src->prometheus->queries) {
        auto r = get(*prometheus, observe::instant_query_path(prometheus->path, promql));
        if (r.status != 200 && r.status != 400 && r.status != 422) continue;  // unreachable now: not read
        auto v = observe::parse_instant_query(r.body);
        if (!v) return {out, fmt::format("Prometheus query '{}': {}", name, v.error().message)};
        if (*v) out[name] = **v;
      }
    } else if (text) {
      for (const auto& [name, gauge] : src->metric) {
        bool any = false;
        double sum = 0;
        for (const auto& s : text->samples) {
          if (s.name == gauge) {
            sum += s.value;
            any = true;
          }
        }
        if (any) out[name] = sum;
      }
    }
    return {out, ""};
  }

  // Every gauge of the target's metrics text: the mean over its series.
  static json gauges_of(const observe::Exposition& text) {
    std::map<std::string, std::pair<double, int>> acc;
    for (const auto& s : text.samples) {
      auto t = text.types.find(s.name);
      if (t == text.types.end() || t->second != "gauge" || !std::isfinite(s.value)) continue;
      auto& [sum, n] = acc[s.name];
      sum += s.value;
      ++n;
    }
    json out = json::object();
    for (const auto& [name, sn] : acc) out[name] = sn.first / sn.second;
    return out;
  }

  // What is read at the end of window `index`.
  void read_window_end(int index) {
    json reading = json::object();
    std::optional<observe::Exposition> text;
    if (metrics) {
      auto r = get(*metrics, metrics->path);
      if (r.status == 200) {
        auto parsed = observe::parse_prometheus_text(r.body);
        if (parsed) text = std::move(*parsed);
      }
    }
    auto [c, error] = read_counts(text ? &*text : nullptr);
    if (!error.empty()) {
      if (o.on_fatal) o.on_fatal(error);
      return;
    }
    const double t = to_s(spec.scenario->window * (index + 1));
    for (const char* which : {"ready", "desired", "serving"}) {
      if (!c.contains(which)) {
        reading[which] = nullptr;
        continue;
      }
      const double v = c[which].get<double>();
      reading[which] = v;
      auto before = counts.find(which);
      if (before != counts.end() && before->second != v) {
        event({{"t_s", t}, {"kind", "replicas"}, {"which", which}, {"from", before->second}, {"to", v}});
        // A moment the readiness check judges, dated from this window's start or at its end.
        if (std::string_view(which) == "ready" && v > before->second) keep_requests(t - to_s(spec.scenario->window), t);
      }
      counts[which] = v;
    }
    reading["readiness"] = ready_state ? json(*ready_state) : json(nullptr);
    reading["server"] = text ? gauges_of(*text) : json(nullptr);
    readings[index] = std::move(reading);
    // A moment is known a window after it at the latest: what was scheduled before that, and
    // after no moment, is not needed.
    if (readiness_window_s) {
      std::lock_guard lock(m);
      earliest.forget_before(t - to_s(spec.scenario->window) - *readiness_window_s - 1);
    }
  }

  // Keeps the requests scheduled from `from_s` to the readiness window after `to_s`.
  void keep_requests(double from_s, double to_s) {
    if (!readiness_window_s) return;
    std::lock_guard lock(m);
    earliest.keep(from_s, to_s + *readiness_window_s);
  }

  void poll_readiness() {
    auto r = get(*readiness, readiness->path);
    const bool ready = r.status == 200;
    if (!ready_state || *ready_state != ready) {
      const double t = now_s();
      event({{"t_s", t}, {"kind", "readiness"}, {"ready", ready}, {"status", r.status}});
      if (ready) keep_requests(t, t);
      ready_state = ready;
    }
  }

  // Closes what can be closed and stores it.
  void close_windows(bool final) {
    const std::vector<LiveRequest> live = o.live ? o.live() : std::vector<LiveRequest>{};  // before taking `m`
    const std::uint64_t in_flight = o.in_flight ? o.in_flight() : 0;
    std::vector<WindowRow> rows;
    {
      std::lock_guard lock(m);
      rows = acc.take_closed(
          SteadyClock::now() - origin, in_flight, live,
          [this](Nanos a, Nanos b) { return profile.expected_before(b) - profile.expected_before(a); }, final);
    }
    for (const WindowRow& r : rows) store_row(r);
  }

  void store_row(const WindowRow& r) {
    json row = window_json(r);
    auto reading = readings.find(r.index);
    const json extra = reading != readings.end() ? reading->second
                                                 : json{{"ready", nullptr},
                                                        {"desired", nullptr},
                                                        {"serving", nullptr},
                                                        {"readiness", nullptr},
                                                        {"server", nullptr}};
    for (const auto& [k, v] : extra.items()) row[k] = v;
    const double from = r.t_start_s, to = from + to_s(spec.scenario->window);
    json in_window = json::array();
    {
      std::lock_guard lock(events_m);
      for (const auto& e : events) {
        const double t = e.value("t_s", -1.0);
        if (t >= from && t < to) in_window.push_back(e);
      }
    }
    row["events"] = std::move(in_window);
    if (reading != readings.end()) readings.erase(reading);
    store.append_window(id, r.index, r.t_start_s, row);
    if (o.on_window) o.on_window(row);
  }

  void loop() {
    const auto poll = std::chrono::milliseconds(100);
    auto next_poll = SteadyClock::now();
    while (running) {
      if (readiness && SteadyClock::now() >= next_poll) {
        poll_readiness();
        next_poll += poll;
      }
      while (running && SteadyClock::now() - origin >= spec.scenario->window * (next_reading + 1) &&
             next_reading < acc.windows()) {
        read_window_end(next_reading++);
      }
      close_windows(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
};

ScenarioWatch::ScenarioWatch(const JobSpec& spec, const Profile& profile, std::string sweep_id, store::Store& store,
                             Options options)
    : impl_(std::make_unique<Impl>(spec, profile, std::move(sweep_id), store, std::move(options))) {
  impl_->open_sources();
}

ScenarioWatch::~ScenarioWatch() {
  impl_->running = false;
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::string ScenarioWatch::probe_replica_source() {
  if (!impl_->prometheus) return {};
  auto [counts, error] = impl_->read_counts(nullptr);
  return error;
}

void ScenarioWatch::start(SteadyClock::time_point origin) {
  Impl& i = *impl_;
  i.origin = origin;
  const auto spike = spike_start_s(i.spec, i.profile);
  for (std::size_t s = 0; s < i.profile.segments().size(); ++s) {
    const ProfileSegment& seg = i.profile.segments()[s];
    i.event({{"t_s", to_s(i.profile.start_of(s))},
             {"kind", "segment"},
             {"segment", s},
             {"rate_rps", seg.rate_rps},
             {"to_rate_rps", seg.to_rate_rps}});
  }
  if (spike) i.event({{"t_s", *spike}, {"kind", "spike"}, {"capacity_rps", *i.spec.scenario->capacity_rps}});
  i.running = true;
  i.thread = std::thread([&i] { i.loop(); });
}

void ScenarioWatch::scheduled(Nanos at) {
  std::lock_guard lock(impl_->m);
  impl_->acc.on_scheduled(at);
  if (!impl_->first_scheduled) impl_->first_scheduled = at;
}

void ScenarioWatch::ended(const RequestRecord& rec) {
  const bool fast_rejection =
      rec.outcome == Outcome::http_4xx ||
      (rec.outcome == Outcome::http_5xx && rec.finished - rec.sent < std::chrono::milliseconds(250));
  const auto token = rec.first_token();
  bool first = false;
  {
    std::lock_guard lock(impl_->m);
    impl_->acc.on_ended(rec, fast_rejection);
    if (impl_->readiness_window_s)
      impl_->earliest.add({to_s(rec.scheduled),
                           token ? std::optional<double>(to_ms(*token - rec.scheduled)) : std::nullopt, rec.outcome,
                           fast_rejection});
    first = !impl_->first_ended && impl_->first_scheduled && rec.scheduled == *impl_->first_scheduled;
    if (first) impl_->first_ended = true;
  }
  if (first) {
    impl_->event({{"t_s", to_s(rec.finished)},
                  {"kind", "first_token"},
                  {"scheduled_s", to_s(rec.scheduled)},
                  {"ttft_ms", token ? json(to_ms(*token - rec.scheduled)) : json(nullptr)},
                  {"outcome", std::string(to_string(rec.outcome))}});
  }
}

json ScenarioWatch::stop() {
  Impl& i = *impl_;
  i.running = false;
  if (i.thread.joinable()) i.thread.join();
  // The windows left: what was last read stands for the rest.
  while (i.next_reading < i.acc.windows() &&
         SteadyClock::now() - i.origin >= i.spec.scenario->window * (i.next_reading + 1)) {
    i.read_window_end(i.next_reading++);
  }
  i.close_windows(true);
  std::lock_guard lock(i.events_m);
  json sorted = i.events;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const json& a, const json& b) { return a.value("t_s", 0.0) < b.value("t_s", 0.0); });
  return sorted;
}

const EarliestRequests& ScenarioWatch::requests() const {
  return impl_->earliest;
}

}  // namespace capsweep::sweep

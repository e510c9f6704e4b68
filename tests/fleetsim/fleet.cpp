#include "fleetsim/fleet.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <cstdio>
#include <deque>
#include <set>
#include <thread>

#include "core/log.hpp"
#include "http/server.hpp"
#include "llmsim/sim_server.hpp"
#include "observe/prometheus.hpp"
#include "observe/text_writer.hpp"

namespace capsweep::fleetsim {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;
constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

namespace {

constexpr auto log_exception = [](std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log::error(fmt::format("{}", ex.what()));
  }
};

// One replica: a capsweep-llmsim server on a loopback port, on a thread of its own.
struct Replica {
  enum class State { loading, ready, leaving };
  int id = 0;
  std::unique_ptr<asio::io_context> io;
  std::unique_ptr<llmsim::SimServer> sim;
  std::thread thread;
  std::atomic<bool> ended{false};  // its io_context returned (drained or stopped)
  std::uint16_t port = 0;
  State state = State::loading;
  std::uint64_t in_flight = 0;      // requests the gateway relays to it now
  double running = 0, waiting = 0;  // its gauges at the last scrape
  std::string metrics_text;         // its /metrics at the last scrape
};

// A GET of `path` on a replica: status (0 on failure) and body.
asio::awaitable<std::pair<unsigned, std::string>> get(std::uint16_t port, std::string path,
                                                      std::chrono::milliseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  beast::tcp_stream s(ex);
  s.expires_after(timeout);
  const asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
  auto [cec] = co_await s.async_connect(ep, use_tuple);
  if (cec) co_return std::pair<unsigned, std::string>{0, {}};
  bhttp::request<bhttp::string_body> req{bhttp::verb::get, path, 11};
  req.set(bhttp::field::host, "127.0.0.1");
  auto [wec, wn] = co_await bhttp::async_write(s, req, use_tuple);
  if (wec) co_return std::pair<unsigned, std::string>{0, {}};
  beast::flat_buffer buf;
  bhttp::response<bhttp::string_body> res;
  auto [rec, rn] = co_await bhttp::async_read(s, buf, res, use_tuple);
  if (rec) co_return std::pair<unsigned, std::string>{0, {}};
  co_return std::pair<unsigned, std::string>{res.result_int(), std::move(res.body())};
}

// A replica's /metrics text with replica="<id>" added to every sample; HELP and TYPE lines are
// kept the first time a family is seen (`seen`).
void relabel(const std::string& text, int id, std::set<std::string>& seen, std::string& out) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    if (line[0] == '#') {
      if (seen.insert(std::string(line)).second) {
        out.append(line);
        out += '\n';
      }
      continue;
    }
    const auto brace = line.find('{');
    const auto space = line.find(' ');
    if (brace != std::string_view::npos && brace < space) {
      out.append(line.substr(0, brace + 1));
      out += fmt::format("replica=\"{}\",", id);
      out.append(line.substr(brace + 1));
    } else if (space != std::string_view::npos) {
      out.append(line.substr(0, space));
      out += fmt::format("{{replica=\"{}\"}}", id);
      out.append(line.substr(space));
    }
    out += '\n';
  }
}

}  // namespace

struct Fleet::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_context, FleetConfig c)
      : io(io_context),
        cfg(std::move(c)),
        hpa(cfg.hpa),
        server(
            io.get_executor(), [this](http::Request& req, beast::tcp_stream& s) { return handle(req, s); },
            http::ServerOptions{.body_limit = 1 << 20,
                                .read_timeout = std::chrono::milliseconds(30'000),
                                .idle_timeout = std::chrono::milliseconds(120'000),
                                .server_name = "capsweep-fleetsim"}) {}

  asio::io_context& io;
  FleetConfig cfg;
  Hpa hpa;
  http::Server server;
  std::vector<std::shared_ptr<Replica>> replicas;
  int next_id = 0;
  int desired = 0;
  std::size_t round_robin = 0;
  std::deque<asio::steady_timer*> waiting_line;  // requests waiting for a ready replica, oldest first
  Clock::time_point t0 = Clock::now();
  Clock::time_point last_request = Clock::now();
  bool stopping = false;
  std::uint64_t requests_total = 0, rejected_total = 0;

  Millis since_start(Clock::time_point t) const { return std::chrono::duration_cast<Millis>(t - t0); }

  int live() const {
    return static_cast<int>(std::count_if(replicas.begin(), replicas.end(),
                                          [](const auto& r) { return r->state != Replica::State::leaving; }));
  }
  int ready() const {
    return static_cast<int>(std::count_if(replicas.begin(), replicas.end(),
                                          [](const auto& r) { return r->state == Replica::State::ready; }));
  }

  // --- replicas ---------------------------------------------------------------------------

  void start_replica() {
    auto r = std::make_shared<Replica>();
    r->id = next_id++;
    llmsim::SimConfig sc = cfg.replica;
    sc.listen = "127.0.0.1:0";
    sc.seed = cfg.replica.seed + static_cast<std::uint64_t>(r->id);
    sc.load_time_s = cfg.load_time_s;
    sc.drain_s = cfg.grace_s;
    if (cfg.readiness == Readiness::lying) {
      sc.ready_lies = true;                              // /health says 200 at once...
      sc.cold_start_mode = llmsim::ColdStartMode::hold;  // ...and requests wait for the model
    } else {
      sc.cold_start_mode = llmsim::ColdStartMode::unavailable;  // /health 503 until loaded
    }
    r->io = std::make_unique<asio::io_context>(1);
    r->sim = std::make_unique<llmsim::SimServer>(*r->io, sc);
    r->sim->start();
    r->port = r->sim->endpoint().port();
    Replica* raw = r.get();
    r->thread = std::thread([raw] {
      raw->io->run();
      raw->ended = true;
    });
    log::info(fmt::format("replica {} starting on port {}", r->id, r->port));
    replicas.push_back(std::move(r));
  }

  // Takes a replica out of service: it gets no new request; graceful lets its streams finish
  // (up to grace_s), abrupt cuts them at once.
  void remove_replica() {
    // Not-ready replicas go first, then the newest.
    std::shared_ptr<Replica> victim;
    for (auto it = replicas.rbegin(); it != replicas.rend(); ++it) {
      if ((*it)->state == Replica::State::leaving) continue;
      if (!victim || ((*it)->state == Replica::State::loading && victim->state != Replica::State::loading))
        victim = *it;
    }
    if (!victim) return;
    victim->state = Replica::State::leaving;
    log::info(fmt::format("replica {} leaving ({})", victim->id,
                          cfg.termination == Termination::graceful ? "graceful" : "abrupt"));
    if (cfg.termination == Termination::graceful) {
      llmsim::SimServer* sim = victim->sim.get();
      asio::post(*victim->io, [sim] { sim->begin_shutdown(); });
    } else {
      victim->io->stop();
    }
  }

  void reconcile() {
    while (live() < desired) start_replica();
    while (live() > desired) remove_replica();
  }

  // Joins and frees the replicas whose thread ended: their sockets close, so a stream still
  // relayed from an abruptly stopped replica is cut.
  void reap() {
    for (auto it = replicas.begin(); it != replicas.end();) {
      Replica& r = **it;
      if (r.state == Replica::State::leaving && r.ended) {
        if (r.thread.joinable()) r.thread.join();
        r.sim.reset();
        r.io.reset();
        log::info(fmt::format("replica {} gone", r.id));
        it = replicas.erase(it);
      } else {
        ++it;
      }
    }
  }

  // --- loops ------------------------------------------------------------------------------

  // Readiness probes (every 100 ms) and the reaper.
  asio::awaitable<void> probe_loop() {
    auto self = shared_from_this();
    asio::steady_timer t(io);
    while (!stopping) {
      for (auto r : std::vector<std::shared_ptr<Replica>>(replicas)) {
        if (r->state != Replica::State::loading) continue;
        auto [status, body] = co_await get(r->port, "/health", std::chrono::milliseconds(500));
        if (status == 200 && r->state == Replica::State::loading) {
          r->state = Replica::State::ready;
          log::info(fmt::format("replica {} ready", r->id));
        }
      }
      reap();
      t.expires_after(std::chrono::milliseconds(100));
      co_await t.async_wait(use_tuple);
    }
  }

  // Reads each replica's gauges (for /metrics and the controller).
  asio::awaitable<void> scrape_all() {
    for (auto r : std::vector<std::shared_ptr<Replica>>(replicas)) {
      if (r->state == Replica::State::leaving && r->ended) continue;
      auto [status, body] = co_await get(r->port, "/metrics", std::chrono::milliseconds(1000));
      if (status != 200) continue;
      r->metrics_text = std::move(body);
      auto parsed = observe::parse_prometheus_text(r->metrics_text);
      if (!parsed) continue;
      r->running = r->waiting = 0;
      for (const auto& s : parsed->samples) {
        if (s.name == "vllm:num_requests_running") r->running = s.value;
        if (s.name == "vllm:num_requests_waiting") r->waiting = s.value;
      }
    }
  }

  double gpu_util(const Replica& r) const {
    return std::min(100.0, 100.0 * r.running / std::max(cfg.gpu_saturation_in_flight, 1e-9));
  }

  // The controller: every sync period, the metric of each ready replica into the HPA rule.
  asio::awaitable<void> control_loop() {
    auto self = shared_from_this();
    asio::steady_timer t(io);
    while (!stopping) {
      t.expires_after(cfg.hpa.sync_period);
      co_await t.async_wait(use_tuple);
      if (stopping || !cfg.autoscale) continue;
      co_await scrape_all();
      std::vector<double> metric;
      for (const auto& r : replicas) {
        if (r->state != Replica::State::ready) continue;
        switch (cfg.hpa.metric) {
          case Metric::in_flight:
            metric.push_back(static_cast<double>(r->in_flight));
            break;
          case Metric::waiting:
            metric.push_back(r->waiting);
            break;
          case Metric::gpu_util:
            metric.push_back(gpu_util(*r));
            break;
        }
      }
      const int want = hpa.sync(since_start(Clock::now()), live(), metric, since_start(last_request));
      if (want != desired) {
        log::info(fmt::format("desired {} -> {} ({} per replica {})", desired, want, to_string(cfg.hpa.metric),
                              metric.empty() ? 0.0 : metric.front()));
        desired = want;
        reconcile();
      }
    }
  }

  // --- the gateway ------------------------------------------------------------------------

  std::shared_ptr<Replica> pick() {
    std::vector<std::shared_ptr<Replica>> ready_ones;
    for (const auto& r : replicas)
      if (r->state == Replica::State::ready) ready_ones.push_back(r);
    // A lying replica counts as ready from the start: route to it as the platform would.
    if (ready_ones.empty()) return nullptr;
    if (cfg.routing == Routing::least_loaded) {
      return *std::min_element(ready_ones.begin(), ready_ones.end(),
                               [](const auto& a, const auto& b) { return a->in_flight < b->in_flight; });
    }
    return ready_ones[round_robin++ % ready_ones.size()];
  }

  http::Reply error_reply(const http::Request& req, bhttp::status status, const std::string& message) {
    return {http::json_response(
                req, status,
                fmt::format(R"({{"error": {{"message": "{}", "code": {}}}}})", message, static_cast<int>(status))),
            false};
  }

  // A ready replica for a request, or none after queue_timeout_s. Requests that found none
  // wait in line and leave it in arrival order, as an activator's queue releases them: the
  // first request of a cold fleet is served first.
  asio::awaitable<std::shared_ptr<Replica>> wait_for_replica() {
    std::shared_ptr<Replica> r = waiting_line.empty() ? pick() : nullptr;
    if (r) co_return r;
    const auto give_up = Clock::now() + std::chrono::microseconds(static_cast<long>(cfg.queue_timeout_s * 1e6));
    asio::steady_timer wait(io);
    waiting_line.push_back(&wait);
    struct Leave {
      std::deque<asio::steady_timer*>& line;
      asio::steady_timer* me;
      ~Leave() {
        const bool was_first = !line.empty() && line.front() == me;
        line.erase(std::find(line.begin(), line.end(), me));
        if (was_first && !line.empty()) line.front()->cancel();  // the next one goes at once
      }
    } leave{waiting_line, &wait};
    while (!stopping && Clock::now() < give_up) {
      if (waiting_line.front() == &wait && (r = pick())) break;
      wait.expires_after(std::chrono::milliseconds(20));
      co_await wait.async_wait(use_tuple);
    }
    co_return r;
  }

  // Relays one request to a ready replica and its answer, byte for byte, back to the client.
  asio::awaitable<http::Reply> proxy(http::Request& req, beast::tcp_stream& client) {
    auto self = shared_from_this();
    last_request = Clock::now();
    ++requests_total;
    if (desired == 0) {
      desired = hpa.activate(0);  // the first request wakes a fleet scaled to zero
      log::info("activated from zero by a request");
      reconcile();
    }
    std::shared_ptr<Replica> r = co_await wait_for_replica();
    if (!r) {
      ++rejected_total;
      co_return error_reply(req, bhttp::status::service_unavailable, "no ready replica");
    }
    ++r->in_flight;
    struct Done {
      Replica& r;
      ~Done() { --r.in_flight; }
    } done{*r};
    beast::tcp_stream up(io);
    up.expires_after(std::chrono::seconds(10));
    const asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), r->port);
    auto [cec] = co_await up.async_connect(ep, use_tuple);
    if (cec) co_return error_reply(req, bhttp::status::bad_gateway, "the replica did not accept the connection");
    http::Request fwd = req;
    fwd.keep_alive(false);
    fwd.set(bhttp::field::host, fmt::format("127.0.0.1:{}", r->port));
    up.expires_after(std::chrono::seconds(30));
    auto [wec, wn] = co_await bhttp::async_write(up, fwd, use_tuple);
    if (wec) co_return error_reply(req, bhttp::status::bad_gateway, "the replica closed the connection");
    // The answer as it comes: the replica closes the connection at its end (or when cut), and
    // so does the gateway; its header says so ("Connection: close"), so that a client does
    // not send its next request on a connection about to close.
    std::array<char, 16 * 1024> buf{};
    std::string head;  // the answer's header, until its end was seen
    bool head_sent = false;
    while (true) {
      up.expires_after(std::chrono::seconds(600));
      auto [rec, n] = co_await up.async_read_some(asio::buffer(buf), use_tuple);
      std::string_view chunk(buf.data(), n);
      if (!head_sent && (n > 0 || rec)) {
        head.append(chunk);
        const auto end = head.find("\r\n\r\n");
        if (end == std::string::npos && !rec && head.size() < 64 * 1024) continue;
        if (end != std::string::npos) head.insert(end + 2, "Connection: close\r\n");
        head_sent = true;
        chunk = head;
      }
      if (!chunk.empty()) {
        client.expires_after(std::chrono::seconds(30));
        auto [cwec, cwn] = co_await asio::async_write(client, asio::buffer(chunk.data(), chunk.size()), use_tuple);
        if (cwec) break;
      }
      if (rec) break;
    }
    co_return http::Reply{std::nullopt, false};
  }

  std::string render_metrics() {
    std::string out;
    std::set<std::string> seen;
    for (const auto& r : replicas) relabel(r->metrics_text, r->id, seen, out);
    const std::string dep = observe::label("deployment", cfg.deployment);
    observe::render_sample(out, "fleet_replicas_desired", "gauge", "Replicas the controller wants.", "",
                           double(desired));
    observe::render_sample(out, "fleet_replicas_ready", "gauge", "Replicas that are ready.", "", double(ready()));
    observe::render_sample(out, "fleet_replicas_current", "gauge", "Replicas started and not leaving.", "",
                           double(live()));
    observe::render_sample(out, "kube_deployment_spec_replicas", "gauge", "Desired replicas (kube-state-metrics).", dep,
                           double(desired));
    observe::render_sample(out, "kube_deployment_status_replicas_ready", "gauge",
                           "Ready replicas (kube-state-metrics).", dep, double(ready()));
    observe::render_sample(out, "kube_deployment_status_replicas", "gauge", "Replicas (kube-state-metrics).", dep,
                           double(replicas.size()));
    observe::render_header(out, "fleetsim_replica_in_flight", "gauge",
                           "Requests the gateway relays to the replica now.");
    for (const auto& r : replicas) {
      observe::render_value(out, "fleetsim_replica_in_flight", observe::label("replica", std::to_string(r->id)),
                            double(r->in_flight));
    }
    observe::render_header(out, "DCGM_FI_DEV_GPU_UTIL", "gauge",
                           "Simulated GPU utilisation, percent (saturates early).");
    for (const auto& r : replicas) {
      observe::render_value(out, "DCGM_FI_DEV_GPU_UTIL", observe::label("replica", std::to_string(r->id)),
                            gpu_util(*r));
    }
    observe::render_sample(out, "fleetsim_requests_total", "counter", "Completion requests received.", "",
                           double(requests_total));
    observe::render_sample(out, "fleetsim_rejected_total", "counter", "Requests answered 503: no ready replica.", "",
                           double(rejected_total));
    return out;
  }

  asio::awaitable<http::Reply> handle(http::Request& req, beast::tcp_stream& s) {
    auto self = shared_from_this();
    std::string target(req.target());
    target = target.substr(0, target.find('?'));
    if (target == "/health") {
      http::Response res{ready() > 0 ? bhttp::status::ok : bhttp::status::service_unavailable, req.version()};
      co_return http::Reply{std::move(res), true};
    }
    if (target == "/metrics") {
      co_await scrape_all();
      http::Response res{bhttp::status::ok, req.version()};
      res.set(bhttp::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res.body() = render_metrics();
      co_return http::Reply{std::move(res), true};
    }
    if (target == "/fleet") {
      if (req.method() == bhttp::verb::put) {
        // PUT /fleet?replicas=N: sets the desired count by hand (with autoscale off it stays).
        const std::string t(req.target());
        const auto at = t.find("replicas=");
        const int n = at == std::string::npos ? -1 : std::atoi(t.c_str() + at + 9);
        if (n < 0 || n > 64) co_return error_reply(req, bhttp::status::bad_request, "replicas must be 0..64");
        desired = n;
        reconcile();
      }
      std::string states;
      for (const auto& r : replicas) {
        states +=
            fmt::format("{}{{\"id\": {}, \"state\": \"{}\", \"in_flight\": {}}}", states.empty() ? "" : ", ", r->id,
                        r->state == Replica::State::ready     ? "ready"
                        : r->state == Replica::State::loading ? "loading"
                                                              : "leaving",
                        r->in_flight);
      }
      co_return http::Reply{http::json_response(req, bhttp::status::ok,
                                                fmt::format(R"({{"desired": {}, "ready": {}, "replicas": [{}]}})",
                                                            desired, ready(), states)),
                            true};
    }
    co_return co_await proxy(req, s);
  }

  void start() {
    server.bind(http::parse_listen_address(cfg.listen).value());
    desired = cfg.initial_replicas;
    reconcile();
    server.start();
    asio::co_spawn(io, probe_loop(), log_exception);
    asio::co_spawn(io, control_loop(), log_exception);
  }

  void shutdown() {
    if (stopping) return;
    stopping = true;
    server.shutdown();
    for (auto& r : replicas) {
      r->io->stop();
      if (r->thread.joinable()) r->thread.join();
    }
    replicas.clear();
    auto t = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(200));
    t->async_wait([self = shared_from_this(), t](beast::error_code) { self->io.stop(); });
  }
};

Result<FleetConfig> validate(const FleetConfig& cfg) {
  const HpaSettings& h = cfg.hpa;
  if (h.min_replicas < 0 || h.min_replicas > 64) return invalid("/min_replicas", "must be in 0..64");
  if (h.max_replicas < std::max(1, h.min_replicas) || h.max_replicas > 64) {
    return invalid("/max_replicas", "must be in max(1, min_replicas)..64");
  }
  if (cfg.initial_replicas < 0 || cfg.initial_replicas > h.max_replicas) {
    return invalid("/replicas", "must be in 0..max_replicas");
  }
  if (!(h.target > 0)) return invalid("/target", "must be positive");
  if (!(h.tolerance >= 0 && h.tolerance < 1)) return invalid("/tolerance", "must be in [0, 1)");
  if (h.sync_period.count() <= 0) return invalid("/sync_period_s", "must be positive");
  if (cfg.load_time_s < 0) return invalid("/load_time_s", "must be >= 0");
  if (cfg.grace_s < 0) return invalid("/grace_s", "must be >= 0");
  if (!(cfg.gpu_saturation_in_flight > 0)) return invalid("/gpu_saturation_in_flight", "must be positive");
  auto replica = llmsim::validate(cfg.replica);
  if (!replica) return replica.error();
  return cfg;
}

Fleet::Fleet(asio::io_context& io, FleetConfig cfg) : impl_(std::make_shared<Impl>(io, std::move(cfg))) {}
Fleet::~Fleet() {
  for (auto& r : impl_->replicas) {
    if (r->io) r->io->stop();
    if (r->thread.joinable()) r->thread.join();
  }
}
void Fleet::start() {
  impl_->start();
}
asio::ip::tcp::endpoint Fleet::endpoint() const {
  return impl_->server.local_endpoint();
}
void Fleet::shutdown() {
  impl_->shutdown();
}

}  // namespace capsweep::fleetsim

// capsweepd against a careless user and an attacker: every class of the hardening issue, each
// with a check that would have caught it. The real program on loopback; targets are
// capsweep-llmsim (in-process) or small raw servers of the test's own.
#include <fmt/format.h>

#include <atomic>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <random>
#include <thread>

#include "integration/llmsim_fixture.hpp"
#include "service/daemon_fixture.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace asio = boost::asio;

namespace {

std::string url_of(const asio::ip::tcp::endpoint& ep) {
  return "http://127.0.0.1:" + std::to_string(ep.port());
}

json check_job(const std::string& base_url, double rate, double duration_s) {
  json s = sim_job(base_url, "hostile");
  s["kind"] = "check";
  s["check"] = {{"rate_rps", rate}, {"duration_s", duration_s}, {"warmup_s", 0.5}};
  return s;
}

std::string submit(const Daemon& d, const json& spec) {
  auto r = d.post("/v1/sweeps", spec.dump());
  INFO(r.body);
  REQUIRE(r.status == 201);
  return json::parse(r.body)["id"].get<std::string>();
}

std::filesystem::path write_config(const TempDir& dir, const json& config) {
  const auto p = dir.path("capsweepd.json");
  std::ofstream(p) << config.dump();
  return p;
}

// A target of the test's own: accepts connections and answers each with `reply` (raw bytes)
// after reading a request, or never answers when `reply` is empty. Stops on destruction.
class RawServer {
 public:
  explicit RawServer(std::string reply)
      : reply_(std::move(reply)), acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    thread_ = std::thread([this] {
      while (!stop_) {
        boost::system::error_code ec;
        asio::ip::tcp::socket s(io_);
        acceptor_.accept(s, ec);
        if (ec || stop_) break;
        if (reply_.empty()) {
          held_.push_back(std::move(s));  // connected, never answered
          continue;
        }
        char buf[8192];
        s.read_some(asio::buffer(buf), ec);
        asio::write(s, asio::buffer(reply_), ec);
        s.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
      }
    });
  }
  ~RawServer() {
    stop_ = true;
    boost::system::error_code ec;
    asio::ip::tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ec);  // wakes the blocking accept
    thread_.join();
  }
  asio::ip::tcp::endpoint endpoint() const { return acceptor_.local_endpoint(); }

 private:
  std::string reply_;
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::vector<asio::ip::tcp::socket> held_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void expect_refused(const Daemon& d, const HttpResult& r, int status, const std::string& field_prefix) {
  INFO(r.status << " " << r.body);
  CHECK(r.status == status);
  const json err = json::parse(r.body, nullptr, false);
  REQUIRE(err.is_object());
  CHECK(err["error"]["field"].get<std::string>().rfind(field_prefix, 0) == 0);
  CHECK(d.get("/healthz").status == 200);
}

}  // namespace

TEST_CASE("hostile: hundreds of pollers during a running step - every poll answered, the daemon lives") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string id = submit(d, check_job(url_of(sim.endpoint()), 40, 8));
  d.wait_for(
      id, [](const json& v) { return v["status"] == "running"; }, 20s);
  constexpr int kPollers = 200;
  std::atomic<int> ok{0}, bad{0};
  std::vector<std::thread> pollers;
  for (int p = 0; p < kPollers; ++p) {
    pollers.emplace_back([&, p] {
      std::mt19937 rng(static_cast<unsigned>(p));
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 500));  // a dashboard's phase
      for (int i = 0; i < 8; ++i) {
        const auto r = d.get(i % 4 == 3 ? "/v1/sweeps" : "/v1/sweeps/" + id);
        (r.status == 200 ? ok : bad)++;
        std::this_thread::sleep_for(500ms);
      }
    });
  }
  for (auto& t : pollers) t.join();
  CHECK(bad.load() == 0);
  CHECK(ok.load() == kPollers * 8);
  CHECK(d.alive());
  const json done = d.wait_for(
      id, [](const json& v) { return v["status"] != "running" && v["status"] != "queued"; }, 60s);
  CHECK(done["status"] == "succeeded");
}

TEST_CASE("hostile: bodies that would exhaust the stack or memory get a 400 naming the field") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const json good = check_job(url_of(sim.endpoint()), 5, 5);
  // 100,000 nested arrays inside extra_body: refused before parsing.
  std::string deep = good.dump();
  deep.insert(deep.rfind('}'), R"(, "x": )" + std::string(100'000, '[') + std::string(100'000, ']'));
  json with_extra = good;
  with_extra["target"]["extra_body"] = {{"a", 1}};
  std::string nested = with_extra.dump();
  const auto at = nested.find(R"("a":1)");
  REQUIRE(at != std::string::npos);
  nested.replace(at + 4, 1, std::string(100'000, '[') + std::string(100'000, ']'));
  expect_refused(d, d.post("/v1/sweeps", nested), 400, "/target/extra_body/a/0/0");
  expect_refused(d, d.post("/v1/sweeps", deep), 400, "/x/0");

  auto with = [&](const std::string& pointer, json value) {
    json s = good;
    s[json::json_pointer(pointer)] = std::move(value);
    return s.dump();
  };
  expect_refused(d, d.post("/v1/sweeps", with("/workload/prompt_tokens", {{"dist", "fixed"}, {"value", 4294967296LL}})),
                 400, "/workload/prompt_tokens/value");
  expect_refused(d, d.post("/v1/sweeps", with("/workload/prompt_tokens", {{"dist", "fixed"}, {"value", 500000}})), 400,
                 "/workload/prompt_tokens");  // under the schema's maximum, over the service's limit
  expect_refused(
      d, d.post("/v1/sweeps", with("/workload/output_tokens", {{"dist", "uniform"}, {"min", 1}, {"max", 9000000}})),
      400, "/workload/output_tokens");
  json offline = good;
  offline["arrival"] = {{"process", "all_at_once"}};
  offline["check"] = {{"requests", 10'000'000}};
  expect_refused(d, d.post("/v1/sweeps", offline.dump()), 400, "/check/requests");
  json many = good;
  many["check"]["rate_rps"] = 2000;
  many["check"]["duration_s"] = 3000;  // each within its own limit, 6,000,000 requests together
  expect_refused(d, d.post("/v1/sweeps", many.dump()), 400, "/check/duration_s");
  json sweep = sim_job(url_of(sim.endpoint()), "long steps");
  sweep["sweep"] = {{"max_step_duration_s", 7200}};  // over the service's 3,600-s step limit
  expect_refused(d, d.post("/v1/sweeps", sweep.dump()), 400, "/sweep/max_step_duration_s");
  expect_refused(d, d.post("/v1/sweeps", with("/target/extra_body", {{"n", 64}})), 400, "/target/extra_body/n");
  expect_refused(d, d.post("/v1/sweeps", with("/target/extra_body", {{"best_of", 8}})), 400,
                 "/target/extra_body/best_of");
  expect_refused(d, d.post("/v1/sweeps", with("/target/tls", {{"ca_file", "/etc/passwd"}})), 403,
                 "/target/tls/ca_file");
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());
  // A lognormal without a max gets the service's limit, shown in the stored spec.
  const std::string id =
      submit(d, json::parse(with("/workload/prompt_tokens", {{"dist", "lognormal"}, {"median", 900}, {"p95", 3800}})));
  const json view = d.get_json("/v1/sweeps/" + id);
  CHECK(view["spec"]["workload"]["prompt_tokens"]["max"] == 131072);
  CHECK(view["spec"]["slo"]["max_error_rate"] == 0.001);  // the default error bound is stated
  CHECK(d.post("/v1/sweeps/" + id + "/cancel", "").status == 202);
}

TEST_CASE("hostile: browsers of other sites and rebound host names are refused") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string body = check_job(url_of(sim.endpoint()), 5, 5).dump();
  // A cross-site "simple" form: text/plain with a foreign Origin.
  expect_refused(d, d.post("/v1/sweeps", body, {{"Content-Type", "text/plain"}, {"Origin", "http://evil.example"}}),
                 403, "Origin");
  expect_refused(d, d.post("/v1/sweeps", body, {{"Content-Type", "text/plain"}}), 400, "Content-Type");
  expect_refused(d, d.post("/v1/sweeps", body, {{"Origin", "http://evil.example"}}), 403, "Origin");
  // DNS rebinding: the browser sends the attacker's name as Host.
  expect_refused(d, d.get("/v1/sweeps", {{"Host", "rebind.evil.example:8080"}}), 403, "Host");
  expect_refused(d, d.post("/v1/sweeps", body, {{"Host", "rebind.evil.example"}}), 403, "Host");
  CHECK(d.get_json("/v1/sweeps")["sweeps"].empty());
  CHECK(d.get("/v1/sweeps", {{"Host", "localhost:1234"}}).status == 200);
  CHECK(d.get("/v1/sweeps", {{"Origin", "http://127.0.0.1:9"}}).status == 200);
  const std::string metrics = d.get("/metrics").body;
  CHECK(metrics.find("capsweepd_api_requests_refused_total 5") != std::string::npos);
}

TEST_CASE("hostile: a trickled header is cut at the header deadline, and connection caps answer 503") {
  TempDir dir;
  const auto config = write_config(dir, {{"limits", {{"header_timeout_s", 1}, {"max_api_connections_per_client", 6}}}});
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"), {"--config", config.string()});
  asio::io_context io;
  // Slowloris: a header byte every 300 ms never finishes; the server closes it after ~1 s.
  asio::ip::tcp::socket slow(io);
  slow.connect(d.endpoint());
  asio::write(slow, asio::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")));
  bool closed = false;
  for (int i = 0; i < 40 && !closed; ++i) {  // at most 12 s
    boost::system::error_code ec;
    asio::write(slow, asio::buffer(std::string("X")), ec);
    closed = ec.failed();
    std::this_thread::sleep_for(300ms);
  }
  CHECK(closed);
  // Sockets from one client fill its cap. While they have waited under a second (a poller
  // between polls, about to send) none is closed: the next connection gets a 503 with
  // Retry-After, not a hang.
  std::vector<asio::ip::tcp::socket> idle;
  for (int i = 0; i < 6; ++i) {
    idle.emplace_back(io);
    idle.back().connect(d.endpoint());
  }
  std::this_thread::sleep_for(200ms);
  const auto refused = d.get("/healthz");
  CHECK(refused.status == 503);
  CHECK(refused.headers.count("retry-after") == 1);
  // Once they have idled past a second, a new connection takes the place of the longest idle
  // one and is answered at once.
  std::this_thread::sleep_for(1200ms);
  CHECK(d.get("/healthz").status == 200);
  CHECK(d.get("/healthz").status == 200);
  idle.clear();  // closed: the client is served again
  bool back = false;
  for (int i = 0; i < 50 && !back; ++i) {
    back = d.get("/healthz").status == 200;
    if (!back) std::this_thread::sleep_for(50ms);
  }
  CHECK(back);
  CHECK(d.alive());
}

TEST_CASE("hostile: under an open-file limit of 32, idle sockets never keep out a probe or an admin request") {
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"), {}, 32);
  // Start-up says what the limit allows.
  CHECK(read_text(dir.path("capsweepd.log")).find("the API takes at most 4 connections at once") != std::string::npos);
  asio::io_context io;
  std::vector<asio::ip::tcp::socket> idle;
  for (int i = 0; i < 20; ++i) {
    idle.emplace_back(io);
    boost::system::error_code ec;
    idle.back().connect(d.endpoint(), ec);
  }
  std::this_thread::sleep_for(1200ms);
  // Each probe and admin request takes an idle socket's place: none waits for a descriptor.
  for (int i = 0; i < 6; ++i) {
    CHECK(d.get("/healthz").status == 200);
    CHECK(d.get("/readyz").status == 200);
  }
  CHECK(d.get("/v1/sweeps").status == 200);
  CHECK(d.alive());
}

TEST_CASE("hostile: a request target or header over its limit gets 414 or 431 with the JSON error, and it serves on") {
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const auto expect = [&](const std::string& request, const char* status, const char* code) {
    const std::string answer = raw_exchange(d.endpoint(), request);
    INFO(answer.substr(0, 300));
    CHECK(answer.rfind(std::string("HTTP/1.1 ") + status, 0) == 0);
    const auto body = answer.find("\r\n\r\n");
    REQUIRE(body != std::string::npos);
    const json err = json::parse(answer.substr(body + 4), nullptr, false);
    REQUIRE(err.is_object());
    CHECK(err["error"]["code"] == code);
  };
  // A 10 KiB target within the header limit, and a 40 KiB one past it.
  expect("GET /v1/sweeps/" + std::string(10 * 1024, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "414",
         "uri_too_long");
  expect("GET /v1/sweeps?x=" + std::string(40 * 1024, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "414",
         "uri_too_long");
  // A short target with 40 KiB of headers.
  std::string headers;
  for (int i = 0; i < 40; ++i) headers += fmt::format("X-Pad-{}: {}\r\n", i, std::string(1000, 'b'));
  expect("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + "\r\n", "431", "request_header_fields_too_large");
  // One header field of 17 KiB: the header is too large, not the target.
  expect("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(17 * 1024, 'c') + "\r\n\r\n", "431",
         "request_header_fields_too_large");
  // Two Host headers (RFC 9112 3.2): which host is meant is unknown.
  expect("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n\r\n", "400", "bad_request");
  CHECK(d.get("/healthz").status == 200);
  CHECK(d.alive());
}

TEST_CASE("hostile: a spec whose sessions or prefix would grow past the prompt limit is refused naming the field") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const auto refused = [&](const json& spec, const char* field) {
    auto r = d.post("/v1/sweeps", spec.dump());
    INFO(r.body);
    CHECK(r.status == 400);
    CHECK(json::parse(r.body)["error"]["field"] == field);
  };
  json s = check_job(url_of(sim.endpoint()), 2, 2);
  // 64 turns of 131,072-token prompts and 32,768-token answers: turn 64 would send 10.45 M tokens.
  s["workload"]["prompt_tokens"] = {{"dist", "fixed"}, {"value", 131072}};
  s["workload"]["output_tokens"] = {{"dist", "fixed"}, {"value", 32768}};
  s["workload"]["sessions"] = {{"turns", 64}};
  refused(s, "/workload/sessions/turns");
  s["workload"]["prompt_tokens"] = {{"dist", "fixed"}, {"value", 200}};
  s["workload"]["output_tokens"] = {{"dist", "fixed"}, {"value", 64}};
  s["workload"]["sessions"] = {{"turns", 5}};
  auto ok = d.post("/v1/sweeps", s.dump());
  CHECK(ok.status == 201);
  json p = check_job(url_of(sim.endpoint()), 2, 2);
  p["workload"]["prompt_tokens"] = {{"dist", "fixed"}, {"value", 30}};
  p["workload"]["prefix"] = {{"tokens", 40}};
  refused(p, "/workload/prefix/tokens");
  p["workload"].erase("prefix");
  p["workload"]["shared_prefix_tokens"] = 1000000;
  refused(p, "/workload/shared_prefix_tokens");
  CHECK(d.alive());
}

TEST_CASE("hostile: a second daemon on one database refuses to start and names the holder") {
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string cmd = std::string(CAPSWEEPD_PATH) + " --listen 127.0.0.1:0 --db " +
                          dir.path("capsweep.db").string() + " > " + dir.path("second.log").string() + " 2>&1";
  CHECK(shell_exit(cmd) == 1);
  const std::string log = read_text(dir.path("second.log"));
  CHECK(log.find("in use by another capsweepd") != std::string::npos);
  CHECK(log.find("pid ") != std::string::npos);
  CHECK(d.alive());
  // Without tokens a non-loopback address is refused unless asked for explicitly.
  const std::string open = std::string(CAPSWEEPD_PATH) + " --listen 0.0.0.0:0 --db " + dir.path("other.db").string() +
                           " > " + dir.path("open.log").string() + " 2>&1";
  CHECK(shell_exit(open) == 2);
  CHECK(read_text(dir.path("open.log")).find("--insecure-no-auth") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir.path("other.db")));
  // The database holds secret headers: owner-only.
  const auto perms = std::filesystem::status(dir.path("capsweep.db")).permissions();
  CHECK((perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) ==
        std::filesystem::perms::none);
}

TEST_CASE("hostile: what a target sends never fails a job or comes back through the API") {
  // A metrics_url aimed at something that is not Prometheus, answering invalid UTF-8.
  RawServer garbage(
      "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 22\r\nConnection: close\r\n\r\n"
      "\xff\xfe secret-token 42 \xff\xfe\n");
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = check_job(url_of(sim.endpoint()), 5, 3);
  spec["target"]["metrics_url"] = url_of(garbage.endpoint()) + "/metrics";
  const std::string id = submit(d, spec);
  const json done = d.wait_for(
      id, [](const json& v) { return v["status"] == "succeeded" || v["status"] == "failed"; }, 60s);
  INFO(done.dump());
  CHECK(done["status"] == "succeeded");
  const auto steps = d.get("/v1/sweeps/" + id + "/steps");
  REQUIRE(steps.status == 200);
  CHECK(steps.body.find("secret-token") == std::string::npos);
  const json s = json::parse(steps.body)["steps"][0];
  CHECK(s["server"]["last_scrape_error"].get<std::string>().rfind("not Prometheus text", 0) == 0);
}

TEST_CASE("hostile: every arrival process and cap runs end to end as a check, and a dead endpoint fails") {
  SimFixture sim(llmsim::SimConfig{});
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  const std::string base = url_of(sim.endpoint());
  for (const char* process : {"constant", "poisson", "gamma", "all_at_once"}) {
    for (int cap : {0, 4}) {
      json spec = check_job(base, 8, 2);
      spec["arrival"] = {{"process", process}};
      if (std::string(process) == "gamma") spec["arrival"]["burstiness"] = 0.5;
      if (std::string(process) == "all_at_once") spec["check"] = {{"requests", 24}};
      spec["check"]["max_concurrency"] = cap;
      const std::string id = submit(d, spec);
      const json done = d.wait_for(
          id, [](const json& v) { return v["status"] == "succeeded" || v["status"] == "failed"; }, 60s);
      INFO(process << " cap " << cap << ": " << done.dump());
      CHECK(done["status"] == "succeeded");
      CHECK(done["result"]["verdict"].is_string());
      CHECK(done["result"]["observations"]["completed"].get<int>() > 0);
    }
  }
  // slo {} against a closed port: the default error bound fails it.
  asio::io_context io;
  asio::ip::tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
  const std::string closed = url_of(probe.local_endpoint());
  probe.close();
  json dead = check_job(closed, 5, 2);
  dead["slo"] = json::object();
  dead["target"].erase("metrics_url");
  const std::string id = submit(d, dead);
  const json done = d.wait_for(
      id, [](const json& v) { return v["status"] == "succeeded" || v["status"] == "failed"; }, 60s);
  CHECK(done["status"] == "succeeded");
  CHECK(done["result"]["verdict"] == "fail");
  CHECK(done["result"]["limiting_metric"] == "error_rate");
}

TEST_CASE("hostile: cancel and SIGTERM win against a target that never answers, and a step that keeps crashing fails") {
  RawServer silent("");  // accepts, never answers
  TempDir dir;
  Daemon d(dir.path("capsweep.db"), dir.path("capsweepd.log"));
  json spec = check_job(url_of(silent.endpoint()), 5, 30);
  spec["target"].erase("metrics_url");
  const std::string a = submit(d, spec);
  d.wait_for(
      a, [](const json& v) { return v["status"] == "running"; }, 10s);
  std::this_thread::sleep_for(300ms);  // calibrating against the silent target
  REQUIRE(d.post("/v1/sweeps/" + a + "/cancel", "").status == 202);
  const json cancelled = d.wait_for(
      a, [](const json& v) { return v["status"] == "cancelled"; }, 5s);
  CHECK(cancelled["status"] == "cancelled");
  // SIGTERM during calibration or a step against the silent target: out well within 10 s.
  const std::string b = submit(d, spec);
  d.wait_for(
      b, [](const json& v) { return v["status"] == "running"; }, 10s);
  CHECK(d.terminate(12s) == 0);
  CHECK(d.log_text().find("did not stop within 10 s") == std::string::npos);  // stopped, not cut off
  // A step the process dies in twice is not started a third time.
  SimFixture sim(llmsim::SimConfig{});
  d.restart();
  REQUIRE(d.post("/v1/sweeps/" + b + "/cancel", "").status == 202);
  d.wait_for(
      b, [](const json& v) { return v["status"] == "cancelled"; }, 10s);
  const std::string c = submit(d, check_job(url_of(sim.endpoint()), 5, 30));
  for (int crash = 0; crash < 2; ++crash) {
    d.wait_for(
        c, [](const json& v) { return v["status"] == "running" && v["progress"]["step"] == 1; }, 30s);
    std::this_thread::sleep_for(1500ms);  // the (resumed) step has begun
    d.kill9();
    d.restart();
  }
  const json failed = d.wait_for(
      c, [](const json& v) { return v["status"] == "failed"; }, 30s);
  INFO(failed.dump());
  CHECK(failed["status"] == "failed");
  CHECK(failed["error"].get<std::string>().find("never ended") != std::string::npos);
}

// capsweep-llmsim over real loopback sockets: SSE framing, usage, chunking, timing of the
// engine model, metrics, faults, cold start and graceful shutdown.

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <nlohmann/json.hpp>
#include <numeric>

#include "integration/llmsim_fixture.hpp"
#include "support/http_client.hpp"

using namespace capsweep;
using namespace capsweep::testing;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::string words(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += i ? " w" : "w";
  return s;
}

std::string completion_body(int prompt_words, int max_tokens, bool stream = true, bool usage = true) {
  json j{{"model", "sim-8b"},
         {"prompt", words(prompt_words)},
         {"max_tokens", max_tokens},
         {"stream", stream},
         {"ignore_eos", true}};
  if (usage) j["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  return j.dump();
}

llmsim::SimConfig quick_config() {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 2;
  cfg.engine.decode_per_seq_ms = 0.1;
  cfg.engine.prefill_ms_per_token = 0.01;
  return cfg;
}

double ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Parses the JSON events, dropping [DONE].
std::vector<json> json_events(const SseResult& r) {
  std::vector<json> out;
  for (const auto& e : r.events) {
    if (e.data != "[DONE]") out.push_back(json::parse(e.data));
  }
  return out;
}

// Sum of the scraped sample values of a metric line prefix (e.g. 'vllm:generation_tokens_total{').
double scrape(const std::string& metrics, const std::string& prefix) {
  const auto pos = metrics.find("\n" + prefix);
  if (pos == std::string::npos) return -1;
  const auto space = metrics.find(' ', pos + 1);
  return std::stod(metrics.substr(space + 1, metrics.find('\n', space) - space - 1));
}

}  // namespace

TEST_CASE("llmsim: a completion streams one SSE event per token, usage and [DONE] over chunked HTTP") {
  SimFixture sim(quick_config());
  auto r = post_stream(sim.endpoint(), "/v1/completions", completion_body(12, 8));
  REQUIRE(r.complete);
  CHECK(r.status == 200);
  CHECK(r.headers["content-type"].rfind("text/event-stream", 0) == 0);
  CHECK(r.headers["transfer-encoding"] == "chunked");
  REQUIRE(r.events.size() == 10);  // 8 tokens + usage + [DONE]
  CHECK(r.events.back().data == "[DONE]");
  auto ev = json_events(r);
  for (int i = 0; i < 8; ++i) {
    CHECK(ev[i].at("usage").at("completion_tokens") == i + 1);
    CHECK(ev[i].at("usage").at("prompt_tokens") == 12);
    CHECK(ev[i].at("choices")[0].at("finish_reason") == (i == 7 ? json("length") : json(nullptr)));
  }
  CHECK(ev[8].at("choices").empty());
  CHECK(ev[8].at("usage").at("completion_tokens") == 8);
  CHECK(ev[8].at("usage").at("total_tokens") == 20);
}

TEST_CASE("llmsim: without stream_options there is no usage, and chat streams role then deltas") {
  SimFixture sim(quick_config());
  auto plain = post_stream(sim.endpoint(), "/v1/completions", completion_body(3, 4, true, false));
  REQUIRE(plain.complete);
  auto ev = json_events(plain);
  REQUIRE(ev.size() == 4);
  for (const auto& e : ev) CHECK_FALSE(e.contains("usage"));

  json chat{{"model", "sim-8b"},
            {"messages", {{{"role", "user"}, {"content", "hello there"}}}},
            {"max_completion_tokens", 3},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}}};
  auto c = post_stream(sim.endpoint(), "/v1/chat/completions", chat.dump());
  REQUIRE(c.complete);
  auto cev = json_events(c);
  REQUIRE(cev.size() == 5);  // role, 3 tokens, usage
  CHECK(cev[0].at("choices")[0].at("delta").at("role") == "assistant");
  CHECK(cev[1].at("choices")[0].at("delta").contains("content"));
  CHECK(cev[4].at("usage").at("prompt_tokens") == 2);
  CHECK(cev[4].at("usage").at("completion_tokens") == 3);
}

TEST_CASE("llmsim: non-streaming completions answer once with the whole text and usage") {
  SimFixture sim(quick_config());
  auto r = http_request(sim.endpoint(), "POST", "/v1/completions", completion_body(5, 6, false, false));
  REQUIRE(r.status == 200);
  auto j = json::parse(r.body);
  CHECK(j.at("object") == "text_completion");
  CHECK(j.at("usage").at("completion_tokens") == 6);
  CHECK(j.at("usage").at("prompt_tokens") == 5);
  CHECK(j.at("choices")[0].at("finish_reason") == "length");
}

TEST_CASE("llmsim: a response continues a kept one: the kept conversation is its prompt's start") {
  SimFixture sim(quick_config());
  auto ask = [&](const json& body) {
    auto r = http_request(sim.endpoint(), "POST", "/v1/responses", body.dump());
    INFO(r.body);
    REQUIRE(r.status == 200);
    return json::parse(r.body);
  };
  const json first = ask({{"model", "sim-8b"}, {"input", words(5)}, {"max_output_tokens", 3}});
  CHECK(first.at("object") == "response");
  CHECK(first.at("usage").at("input_tokens") == 5);
  const json second = ask({{"model", "sim-8b"},
                           {"input", json::array({{{"role", "user"}, {"content", words(4)}}})},
                           {"max_output_tokens", 2},
                           {"previous_response_id", first.at("id")}});
  CHECK(second.at("usage").at("input_tokens") == 5 + 3 + 4);  // the first prompt, its answer, the new turn
  // A response not kept (store false) cannot be continued, nor an unknown one.
  const json unkept = ask({{"model", "sim-8b"}, {"input", "a"}, {"max_output_tokens", 1}, {"store", false}});
  for (const json& id : {unkept.at("id"), json("resp-none")}) {
    auto r = http_request(sim.endpoint(), "POST", "/v1/responses",
                          json{{"model", "sim-8b"}, {"input", "b"}, {"previous_response_id", id}}.dump());
    CHECK(r.status == 400);
    CHECK(json::parse(r.body).at("error").at("param") == "previous_response_id");
  }
  // The request bodies' sizes are in the spans.
  const json spans = json::parse(http_request(sim.endpoint(), "GET", "/sim/spans").body).at("spans");
  REQUIRE(spans.size() == 5);
  CHECK(spans[0].at("body_bytes") > 0);
}

TEST_CASE("llmsim: --tokens-per-chunk 4 sends the first token alone, then 4 per chunk") {
  auto cfg = quick_config();
  cfg.tokens_per_chunk = 4;
  SimFixture sim(cfg);
  auto r = post_stream(sim.endpoint(), "/v1/completions", completion_body(3, 10));
  REQUIRE(r.complete);
  auto ev = json_events(r);
  REQUIRE(ev.size() == 5);  // 1 + 4 + 4 + 1 tokens, then usage
  std::vector<int> cumulative;
  for (int i = 0; i < 4; ++i) cumulative.push_back(ev[i].at("usage").at("completion_tokens"));
  CHECK(cumulative == std::vector<int>{1, 5, 9, 10});
  CHECK(ev[1].at("choices")[0].at("text").get<std::string>().size() > 8);  // several words
}

TEST_CASE("llmsim: at low load TTFT is one prefill iteration and ITL one decode iteration (within 10%)") {
  llmsim::SimConfig cfg;
  cfg.engine.decode_base_ms = 20;
  cfg.engine.decode_per_seq_ms = 2;
  cfg.engine.prefill_ms_per_token = 0.1;
  SimFixture sim(cfg);
  // One request alone: TTFT = 20 + 2 x 1 + 0.1 x 200 = 42 ms; ITL = 20 + 2 x 1 = 22 ms.
  // The median of five requests in a row keeps one scheduling hiccup out of the check.
  std::vector<double> ttfts;
  SseResult r;
  for (int i = 0; i < 5; ++i) {
    r = post_stream(sim.endpoint(), "/v1/completions", completion_body(200, 30));
    REQUIRE(r.complete);
    REQUIRE(r.events.size() == 32);
    ttfts.push_back(ms(r.events[0].arrival - r.sent));
  }
  std::sort(ttfts.begin(), ttfts.end());
  CHECK(ttfts[2] == Approx(42).epsilon(0.10));
  std::vector<double> gaps;
  for (int i = 1; i < 30; ++i) gaps.push_back(ms(r.events[i].arrival - r.events[i - 1].arrival));
  const double mean_itl = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
  CHECK(mean_itl == Approx(22).epsilon(0.10));
  std::sort(gaps.begin(), gaps.end());
  CHECK(gaps[gaps.size() / 2] == Approx(22).epsilon(0.10));

  // Two requests together: each ITL is 20 + 2 x 2 = 24 ms.
  auto a = std::async(std::launch::async,
                      [&] { return post_stream(sim.endpoint(), "/v1/completions", completion_body(10, 40)); });
  auto b = std::async(std::launch::async,
                      [&] { return post_stream(sim.endpoint(), "/v1/completions", completion_body(10, 40)); });
  auto ra = a.get(), rb = b.get();
  REQUIRE(ra.complete);
  REQUIRE(rb.complete);
  // The middle of the streams overlaps surely: tokens 10..30.
  const double mid_itl = ms(ra.events[30].arrival - ra.events[10].arrival) / 20;
  CHECK(mid_itl == Approx(24).epsilon(0.10));
  CHECK(sim.lateness().p99_ms < 20);  // the iteration clock kept time (generous for noisy VMs)
}

TEST_CASE("llmsim: /metrics speaks vLLM's names with true values") {
  auto cfg = quick_config();
  cfg.engine.decode_base_ms = 10;
  SimFixture sim(cfg);
  for (int i = 0; i < 3; ++i) {
    REQUIRE(post_stream(sim.endpoint(), "/v1/completions", completion_body(7, 5)).complete);
  }
  // While a long stream runs, the running gauge says 1 and the KV usage reflects it.
  auto running = std::async(std::launch::async,
                            [&] { return post_stream(sim.endpoint(), "/v1/completions", completion_body(100, 60)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto m = http_request(sim.endpoint(), "GET", "/metrics");
  REQUIRE(m.status == 200);
  CHECK(m.headers["content-type"].rfind("text/plain; version=0.0.4", 0) == 0);
  CHECK(scrape(m.body, "vllm:num_requests_running{model_name=\"sim-8b\"}") == 1);
  CHECK(scrape(m.body, "vllm:num_requests_waiting{model_name=\"sim-8b\"}") == 0);
  CHECK(scrape(m.body, "vllm:kv_cache_usage_perc{model_name=\"sim-8b\"}") == Approx(160.0 / 262144));
  CHECK(scrape(m.body, "vllm:prompt_tokens_total{model_name=\"sim-8b\"}") == 3 * 7 + 100);
  CHECK(scrape(m.body, "vllm:request_success_total{model_name=\"sim-8b\",finished_reason=\"length\"}") == 3);
  CHECK(scrape(m.body, "vllm:time_to_first_token_seconds_count{model_name=\"sim-8b\"}") == 4);
  CHECK(scrape(m.body, "vllm:e2e_request_latency_seconds_count{model_name=\"sim-8b\"}") == 3);
  CHECK(m.body.find("# TYPE vllm:inter_token_latency_seconds histogram") != std::string::npos);
  REQUIRE(running.get().complete);
  auto after = http_request(sim.endpoint(), "GET", "/metrics");
  CHECK(scrape(after.body, "vllm:generation_tokens_total{model_name=\"sim-8b\"}") == 3 * 5 + 60);
  CHECK(scrape(after.body, "vllm:inter_token_latency_seconds_count{model_name=\"sim-8b\"}") == 3 * 4 + 59);
  CHECK(scrape(after.body, "vllm:num_requests_running{model_name=\"sim-8b\"}") == 0);
}

TEST_CASE("llmsim: models, tokenize, health and wrong routes") {
  SimFixture sim(quick_config());
  auto models = http_request(sim.endpoint(), "GET", "/v1/models");
  REQUIRE(models.status == 200);
  CHECK(json::parse(models.body).at("data")[0].at("id") == "sim-8b");
  auto tok = http_request(sim.endpoint(), "POST", "/tokenize", R"({"model": "sim-8b", "prompt": "a b  c"})");
  REQUIRE(tok.status == 200);
  auto tj = json::parse(tok.body);
  CHECK(tj.at("count") == 3);
  CHECK(tj.at("tokens").size() == 3);
  CHECK(tj.at("max_model_len") == 32768);
  CHECK(http_request(sim.endpoint(), "GET", "/health").status == 200);
  CHECK(http_request(sim.endpoint(), "GET", "/nope").status == 404);
  auto wrong_verb = http_request(sim.endpoint(), "GET", "/v1/completions");
  CHECK(wrong_verb.status == 405);
  CHECK(wrong_verb.headers["allow"] == "POST");
}

TEST_CASE("llmsim: bad requests get OpenAI-style 400s and the server keeps serving") {
  SimFixture sim(quick_config());
  const std::vector<std::pair<std::string, std::string>> bad{
      {"{not json", ""},
      {R"({"prompt": "a"})", "model"},
      {R"({"model": "sim-8b", "prompt": "a", "max_tokens": 0})", "max_tokens"},
      {R"({"model": "sim-8b", "prompt": "a", "max_tokens": 40000})", "max_tokens"},
  };
  for (const auto& [body, param] : bad) {
    INFO(body);
    auto r = http_request(sim.endpoint(), "POST", "/v1/completions", body);
    CHECK(r.status == 400);
    auto j = json::parse(r.body);
    CHECK(j.at("error").at("code") == 400);
    CHECK(j.at("error").at("param") == (param.empty() ? json(nullptr) : json(param)));
  }
  CHECK(http_request(sim.endpoint(), "POST", "/v1/completions", R"({"model": "other", "prompt": "a"})").status == 404);
  CHECK(post_stream(sim.endpoint(), "/v1/completions", completion_body(3, 3)).complete);
}

TEST_CASE("llmsim: --error-rate 1 answers HTTP 500") {
  auto cfg = quick_config();
  cfg.error_rate = 1;
  SimFixture sim(cfg);
  auto r = http_request(sim.endpoint(), "POST", "/v1/completions", completion_body(3, 3));
  CHECK(r.status == 500);
  CHECK(json::parse(r.body).at("error").at("type") == "InternalServerError");
}

TEST_CASE("llmsim: --disconnect-rate 1 drops streams mid-way without [DONE]") {
  auto cfg = quick_config();
  cfg.disconnect_rate = 1;
  SimFixture sim(cfg);
  for (int i = 0; i < 3; ++i) {
    auto r = post_stream(sim.endpoint(), "/v1/completions", completion_body(3, 40));
    CHECK(r.status == 200);
    CHECK_FALSE(r.complete);
    CHECK(r.transport_error);
    CHECK(r.events.size() <= 21);  // dropped by token 20 (half of max_tokens)
    for (const auto& e : r.events) CHECK(e.data != "[DONE]");
  }
  auto m = http_request(sim.endpoint(), "GET", "/metrics");
  CHECK(scrape(m.body, "llmsim:request_aborted_total{model_name=\"sim-8b\"}") == 3);
  CHECK(scrape(m.body, "vllm:num_requests_running{model_name=\"sim-8b\"}") == 0);
}

TEST_CASE("llmsim: --stall-ms pauses a stream once, producing one ITL spike") {
  auto cfg = quick_config();
  cfg.stall_rate = 1;
  cfg.stall_ms = 200;
  SimFixture sim(cfg);
  auto r = post_stream(sim.endpoint(), "/v1/completions", completion_body(3, 30));
  REQUIRE(r.complete);
  double max_gap = 0, total = 0;
  for (std::size_t i = 1; i < r.events.size(); ++i) {
    const double g = ms(r.events[i].arrival - r.events[i - 1].arrival);
    max_gap = std::max(max_gap, g);
    total += g;
  }
  CHECK(max_gap >= 190);
  CHECK(max_gap < 400);
  CHECK(json_events(r).size() == 31);  // nothing lost
}

TEST_CASE("llmsim: cold start refuses connections until loaded") {
  auto cfg = quick_config();
  cfg.load_time_s = 0.5;
  SimFixture sim(cfg);
  auto early = http_request(sim.endpoint(), "GET", "/health");
  CHECK(early.transport_error);  // connection refused: nothing listens yet
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  CHECK(http_request(sim.endpoint(), "GET", "/health").status == 200);
  CHECK(post_stream(sim.endpoint(), "/v1/completions", completion_body(3, 2)).complete);
}

TEST_CASE("llmsim: cold start in 503 mode, and a readiness probe that lies") {
  auto cfg = quick_config();
  cfg.load_time_s = 0.5;
  cfg.cold_start_mode = llmsim::ColdStartMode::unavailable;
  {
    SimFixture sim(cfg);
    CHECK(http_request(sim.endpoint(), "GET", "/health").status == 503);
    CHECK(http_request(sim.endpoint(), "POST", "/v1/completions", completion_body(3, 2)).status == 503);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    CHECK(http_request(sim.endpoint(), "GET", "/health").status == 200);
  }
  cfg.ready_lies = true;
  cfg.cold_start_mode = llmsim::ColdStartMode::refuse;
  SimFixture lying(cfg);
  CHECK(http_request(lying.endpoint(), "GET", "/health").status == 200);
  CHECK(http_request(lying.endpoint(), "POST", "/v1/completions", completion_body(3, 2)).status == 503);
}

TEST_CASE("llmsim: graceful shutdown lets a running stream finish and refuses new connections") {
  auto cfg = quick_config();
  cfg.engine.decode_base_ms = 10;
  SimFixture sim(cfg);
  auto running = std::async(std::launch::async,
                            [&] { return post_stream(sim.endpoint(), "/v1/completions", completion_body(3, 50)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto ep = sim.endpoint();
  const auto t0 = Clock::now();
  sim.shutdown_and_wait();  // returns once the server stopped by itself
  auto r = running.get();
  CHECK(r.complete);
  CHECK(r.events.back().data == "[DONE]");
  CHECK(ms(Clock::now() - t0) < 5000);
  CHECK(http_request(ep, "GET", "/health").transport_error);
}

namespace {

// Whether a server answers /health at `ep` within ~5 s.
bool comes_up(const boost::asio::ip::tcp::endpoint& ep) {
  for (int i = 0; i < 300; ++i) {
    if (http_request(ep, "GET", "/health", "", std::chrono::milliseconds(200)).status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The exit code of child `pid` once it exits, within ~5 s (else it is killed: -1).
int exit_code(pid_t pid) {
  int status = -1;
  for (int i = 0; i < 500; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!WIFEXITED(status)) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
  }
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE("llmsim: the program drains on SIGTERM and exits 0") {
  // A free port: bind to 0, read it, release it for the child.
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor probe(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const auto port = probe.local_endpoint().port();
  probe.close();
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string listen = "127.0.0.1:" + std::to_string(port);
    execl(CAPSWEEP_LLMSIM_PATH, CAPSWEEP_LLMSIM_PATH, "--listen", listen.c_str(), "--decode-base-ms", "10", "--drain-s",
          "5", static_cast<char*>(nullptr));
    _exit(127);
  }
  const boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), port);
  REQUIRE(comes_up(ep));
  auto running =
      std::async(std::launch::async, [&] { return post_stream(ep, "/v1/completions", completion_body(3, 40)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  REQUIRE(kill(pid, SIGTERM) == 0);
  auto r = running.get();  // ~0.4 s of tokens still to come: they arrive
  CHECK(r.complete);
  CHECK(r.events.back().data == "[DONE]");
  CHECK(exit_code(pid) == 0);
}

TEST_CASE("llmsim: --replicas serves each replica on the next port, each counting its own requests") {
  // Two free ports in a row: bind both, release them for the child. The second is bound as
  // llmsim binds it (address reuse), so a connection of another test in TIME_WAIT on that
  // port, which the child's bind would not mind, does not rule it out.
  boost::asio::io_context io;
  std::uint16_t port = 0;
  for (int attempt = 0; attempt < 200 && port == 0; ++attempt) {
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    const auto p = a.local_endpoint().port();
    if (p == 65535) continue;
    boost::system::error_code ec;
    boost::asio::ip::tcp::acceptor b(io);
    b.open(boost::asio::ip::tcp::v4());
    b.set_option(boost::asio::socket_base::reuse_address(true));
    b.bind({boost::asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(p + 1)}, ec);
    if (!ec) port = p;
  }
  REQUIRE(port != 0);
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string listen = "127.0.0.1:" + std::to_string(port);
    execl(CAPSWEEP_LLMSIM_PATH, CAPSWEEP_LLMSIM_PATH, "--listen", listen.c_str(), "--replicas", "2", "--decode-base-ms",
          "2", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::vector<boost::asio::ip::tcp::endpoint> eps;
  for (int k = 0; k < 2; ++k)
    eps.emplace_back(boost::asio::ip::make_address("127.0.0.1"), static_cast<std::uint16_t>(port + k));
  for (const auto& ep : eps) CHECK(comes_up(ep));
  // Two requests to the first replica, one to the second: each counts its own.
  for (int n : {0, 0, 1}) CHECK(post_stream(eps[n], "/v1/completions", completion_body(3, 4)).complete);
  const std::string success = "vllm:request_success_total{model_name=\"sim-8b\",finished_reason=\"length\"}";
  CHECK(scrape(http_request(eps[0], "GET", "/metrics").body, success) == 2);
  CHECK(scrape(http_request(eps[1], "GET", "/metrics").body, success) == 1);
  REQUIRE(kill(pid, SIGTERM) == 0);
  CHECK(exit_code(pid) == 0);
}

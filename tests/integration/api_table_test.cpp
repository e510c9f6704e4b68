// A new target API added through the API table alone: this file registers "lines" (POST
// /v1/lines with {"input", "limit"}; its stream sends {"piece": text} events and ends with
// {"end": true, "pieces": n}), serves it on loopback, and runs a check job against it through
// the real API, the job manager, the real HTTP client and the store, to a stored verdict —
// on capsweepd's engine and on two load agents (in this process, so they know the row too).
// Nothing outside this file knows the API: the schema's enum, the target's parser, the
// request body, the path and the stream's reading all come from its row.

#include "llm/api_table.hpp"

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "llm/target.hpp"
#include "support/service_fixture.hpp"

using namespace capsweep;
using namespace std::chrono_literals;
using json = nlohmann::json;
namespace asio = boost::asio;

namespace {

llm::StreamChunk read_lines_chunk(std::string_view data) {
  llm::StreamChunk c;
  const json j = json::parse(data, nullptr, false);
  if (!j.is_object()) return c;  // malformed
  if (j.contains("piece") && j["piece"].is_string()) {
    c.kind = llm::StreamChunk::Kind::content;
  } else if (j.value("end", false)) {
    c.kind = llm::StreamChunk::Kind::empty;
    c.finished = true;
    if (j.contains("pieces") && j["pieces"].is_number_unsigned())
      c.completion_tokens = j["pieces"].get<std::uint64_t>();
  }
  return c;
}

llm::ApiRow lines_row() {
  llm::ApiRow row;
  row.name = "lines";
  row.path = "/v1/lines";
  row.request = [](json& body, const llm::RequestText& text) {
    body["input"] = text.prompt;
    body["limit"] = text.max_tokens;
  };
  row.read_chunk = read_lines_chunk;
  return row;
}

llm::Api registered() {
  static const llm::Api api = llm::register_api(lines_row());
  return api;
}

// Speaks "lines" on loopback: each connection one request; a POST /v1/lines whose body has
// "input" and "limit" is answered with `limit` pieces 2 ms apart (at most 8) and the end,
// anything else with 404. Counts what it answered; stops by itself in its destructor.
class LinesServer {
 public:
  LinesServer() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    acceptor_.non_blocking(true);
    thread_ = std::thread([this] { accept_loop(); });
  }
  ~LinesServer() {
    stop_ = true;
    thread_.join();
    std::lock_guard lock(m_);
    for (auto& t : connections_) t.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  std::atomic<int> streamed{0}, refused{0};

 private:
  void accept_loop() {
    while (!stop_) {
      boost::system::error_code ec;
      asio::ip::tcp::socket s(io_);
      acceptor_.accept(s, ec);
      if (ec) {
        std::this_thread::sleep_for(1ms);
        continue;
      }
      std::lock_guard lock(m_);
      connections_.emplace_back([this, s = std::move(s)]() mutable { answer(s); });
    }
  }
  void answer(asio::ip::tcp::socket& s) {
    boost::system::error_code ec;
    s.non_blocking(false, ec);
    std::string in;
    const std::size_t head = asio::read_until(s, asio::dynamic_buffer(in), "\r\n\r\n", ec);
    if (ec) return;
    std::size_t length = 0;
    if (auto at = in.find("Content-Length: "); at != std::string::npos) length = std::stoul(in.substr(at + 16));
    if (in.size() < head + length)
      asio::read(s, asio::dynamic_buffer(in), asio::transfer_exactly(head + length - in.size()), ec);
    const json body = json::parse(in.substr(head), nullptr, false);
    if (in.rfind("POST /v1/lines ", 0) != 0 || !body.is_object() || !body.contains("input") ||
        !body.contains("limit")) {
      ++refused;
      asio::write(
          s, asio::buffer(std::string("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")), ec);
      return;
    }
    const int n = std::min(8, body["limit"].get<int>());
    asio::write(
        s, asio::buffer(std::string("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")),
        ec);
    for (int i = 0; i < n && !ec; ++i) {
      std::this_thread::sleep_for(2ms);
      asio::write(s, asio::buffer(std::string("data: {\"piece\": \"w\"}\n\n")), ec);
    }
    asio::write(s, asio::buffer("data: {\"end\": true, \"pieces\": " + std::to_string(n) + "}\n\n"), ec);
    ++streamed;
    s.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  }

  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex m_;
  std::vector<std::thread> connections_;
};

json check_job(std::uint16_t port, const std::string& api) {
  return {
      {"kind", "check"},
      {"target", {{"base_url", "http://127.0.0.1:" + std::to_string(port)}, {"model", "m"}, {"api", api}}},
      {"workload",
       {{"prompt_tokens", {{"dist", "fixed"}, {"value", 8}}}, {"output_tokens", {{"dist", "fixed"}, {"value", 4}}}}},
      {"arrival", {{"process", "constant"}}},
      {"slo", {{"ttft_ms", {{"p95", 800}}}}},
      {"check", {{"rate_rps", 100}, {"duration_s", 2}, {"warmup_s", 0}}}};
}

}  // namespace

TEST_CASE("target APIs: an API registered from one file builds its body, path and reading") {
  const llm::Api api = registered();
  CHECK(llm::to_string(api) == "lines");
  CHECK(llm::parse_api("lines") == api);
  auto target = llm::parse_target({{"base_url", "http://127.0.0.1:9/base"}, {"model", "m"}, {"api", "lines"}});
  REQUIRE(target.has_value());
  CHECK(target->api == api);
  CHECK(target->completion_path() == "/base/v1/lines");
  const json body = json::parse(llm::completion_body(*target, "hello there", 4));
  CHECK(body["input"] == "hello there");
  CHECK(body["limit"] == 4);
  CHECK(body["model"] == "m");
  CHECK_FALSE(body.contains("prompt"));
  CHECK_FALSE(body.contains("messages"));
  CHECK(llm::api_row(api).read_chunk(R"({"piece": "a"})").kind == llm::StreamChunk::Kind::content);
  CHECK(llm::api_row(api).read_chunk(R"({"end": true, "pieces": 3})").finished);
  const auto bad = llm::parse_target({{"base_url", "http://127.0.0.1:9"}, {"model", "m"}, {"api", "line"}});
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().field == "/target/api");
  CHECK(bad.error().message.find("lines") != std::string::npos);  // the table's names
  // A name taken, a path not from '/', no reader: refused.
  CHECK_THROWS_AS(llm::register_api(lines_row()), std::invalid_argument);
  llm::ApiRow no_path = lines_row();
  no_path.name = "lines2";
  no_path.path = "v1/lines";
  CHECK_THROWS_AS(llm::register_api(no_path), std::invalid_argument);
  llm::ApiRow no_reader = lines_row();
  no_reader.name = "lines3";
  no_reader.read_chunk = nullptr;
  CHECK_THROWS_AS(llm::register_api(no_reader), std::invalid_argument);
}

TEST_CASE("target APIs: a registered API runs through the API, the real client and a server to a stored verdict") {
  registered();
  LinesServer server;
  testing::Service s("apis", std::nullopt);

  auto r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", check_job(server.port(), "line").dump());
  CHECK(r.status == 400);
  CHECK(json::parse(r.body)["error"].value("field", "") == "/target/api");

  r = testing::http_request(s.endpoint, "POST", "/v1/sweeps", check_job(server.port(), "lines").dump());
  REQUIRE(r.status == 201);
  const std::string id = json::parse(r.body).value("id", "");
  const json job = s.wait_end(id);
  REQUIRE(job.value("status", "") == "succeeded");
  CHECK(job["result"].value("verdict", "") == "pass");
  CHECK(job["spec"]["target"].value("api", "") == "lines");

  r = testing::http_request(s.endpoint, "GET", "/v1/sweeps/" + id + "/steps");
  REQUIRE(r.status == 200);
  const json steps = json::parse(r.body);
  const json& list = steps.is_array() ? steps : steps["steps"];
  REQUIRE(list.size() == 1);
  const json& summary = list[0]["summary"];
  // 200 requests at 100 req/s for 2 s (enough for a p95 to be decided), each read as the row
  // reads: 4 pieces, then the end.
  CHECK(summary.value("completed", 0) == 200);
  CHECK(summary.value("failed", 0) == 0);
  CHECK(summary.value("total_output_tokens", 0) == 800);
  CHECK(server.streamed.load() >= 200);
}

TEST_CASE("target APIs: a registered API on two agents sends the local run's schedule to the same verdict") {
  registered();
  LinesServer server;
  testing::Service s("apis-agents", std::nullopt, true);
  json spec = check_job(server.port(), "lines");
  const auto [local, shared] = s.local_and_on_agents(spec, 2);
  CHECK(shared["summary"].value("completed", 0) == 200);  // every request read as the row reads
  CHECK(shared["summary"].value("total_output_tokens", 0) == 800);
}

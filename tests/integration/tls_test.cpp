// HTTPS targets: a TLS server with a certificate made for the test; the client verifies
// certificates by default, trusts an extra CA file when told, and reports TLS failures as tls.

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <thread>

#include "loadgen/step_runner.hpp"
#include "support/tls_server.hpp"

using namespace capsweep;
using capsweep::testing::Credentials;
using capsweep::testing::make_self_signed;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

// Serves a canned three-token SSE answer to every request, over TLS, until stopped.
class TlsSseServer {
 public:
  explicit TlsSseServer(const Credentials& creds) : ssl_(asio::ssl::context::tls_server), acceptor_(io_) {
    ssl_.use_certificate_chain(asio::buffer(creds.cert_pem));
    ssl_.use_private_key(asio::buffer(creds.key_pem), asio::ssl::context::pem);
    acceptor_.open(asio::ip::tcp::v4());
    acceptor_.bind({asio::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this] { serve(); });
  }
  ~TlsSseServer() {
    stop_ = true;
    boost::system::error_code ec;
    asio::ip::tcp::socket poke(io_);
    poke.connect({asio::ip::make_address("127.0.0.1"), port_}, ec);
    thread_.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  void serve() {
    while (!stop_) {
      asio::ssl::stream<asio::ip::tcp::socket> s(io_, ssl_);
      boost::system::error_code ec;
      acceptor_.accept(s.lowest_layer(), ec);
      if (ec || stop_) continue;
      s.handshake(asio::ssl::stream_base::server, ec);
      if (ec) continue;  // the client refused our certificate
      for (;;) {
        asio::streambuf buf;
        const auto n = asio::read_until(s, buf, "\r\n\r\n", ec);
        if (ec) break;
        std::string head(asio::buffers_begin(buf.data()), asio::buffers_begin(buf.data()) + static_cast<long>(n));
        std::size_t length = 0;
        if (auto p = head.find("Content-Length: "); p != std::string::npos) length = std::stoul(head.substr(p + 16));
        if (buf.size() - n < length) asio::read(s, buf, asio::transfer_exactly(length - (buf.size() - n)), ec);
        if (ec) break;
        std::string body;
        for (const char* token : {" a", " b", " c"}) {
          body += std::string("data: {\"choices\":[{\"index\":0,\"text\":\"") + token + "\"}]}\n\n";
        }
        body += "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3}}\n\ndata: [DONE]\n\n";
        char size[16];
        std::snprintf(size, sizeof size, "%zx", body.size());
        const std::string response = std::string(
                                         "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                                         "Transfer-Encoding: chunked\r\n\r\n") +
                                     size + "\r\n" + body + "\r\n0\r\n\r\n";
        asio::write(s, asio::buffer(response), ec);
        if (ec) break;
      }
    }
  }

  asio::io_context io_;
  asio::ssl::context ssl_;
  asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::shared_ptr<const llm::Workload> tiny_workload() {
  llm::WorkloadSpec w;
  w.prompt_tokens = LengthDist::fixed(5);
  w.output_tokens = LengthDist::fixed(3);
  return std::make_shared<llm::Workload>(w, llm::PromptSynth(1.0));
}

loadgen::StepSpec few_requests() {
  loadgen::StepSpec s;
  s.arrival = {ArrivalProcess::constant, 10, 1};
  s.duration = 500ms;
  s.drain_timeout = 5s;
  return s;
}

}  // namespace

TEST_CASE("tls: an HTTPS target with a trusted CA file streams like plain HTTP") {
  const auto creds = make_self_signed();
  const std::string ca = "capsweep-test-ca.pem";
  std::ofstream(ca) << creds.cert_pem;
  TlsSseServer server(creds);
  auto target = llm::parse_base_url(llm::Target{}, "https://127.0.0.1:" + std::to_string(server.port()), "/u").value();
  target.model = "m";
  target.ca_file = ca;
  loadgen::StepRunner runner(target, tiny_workload());
  auto r = runner.run(few_requests()).value();
  CHECK(r.metrics.measured == 5);
  CHECK(r.metrics.completed == 5);
  CHECK(r.metrics.total_output_tokens == 15);
  CHECK(r.metrics.itl_ms.count() == 10);
  std::remove(ca.c_str());
}

TEST_CASE("tls: certificates are verified by default - an unknown issuer is a tls error") {
  const auto creds = make_self_signed();
  TlsSseServer server(creds);
  auto target = llm::parse_base_url(llm::Target{}, "https://127.0.0.1:" + std::to_string(server.port()), "/u").value();
  target.model = "m";
  loadgen::StepRunner runner(target, tiny_workload());
  auto r = runner.run(few_requests()).value();
  CHECK(r.metrics.outcomes[static_cast<std::size_t>(Outcome::tls)] == r.metrics.measured);
  CHECK(r.metrics.completed == 0);

  target.verify_tls = false;  // an explicit opt-out works
  loadgen::StepRunner trusting(target, tiny_workload());
  CHECK(trusting.run(few_requests()).value().metrics.completed == 5);
}

TEST_CASE("tls: a CA file that cannot be read is refused up front") {
  auto target = llm::parse_base_url(llm::Target{}, "https://127.0.0.1:1", "/u").value();
  target.model = "m";
  target.ca_file = "/nonexistent/ca.pem";
  loadgen::StepRunner runner(target, tiny_workload());
  CHECK_THROWS_WITH(runner.run(few_requests()), Catch::Contains("CA file"));
}

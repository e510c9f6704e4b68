// HTTPS targets: a TLS server with a certificate made for the test; the client verifies
// certificates by default, trusts an extra CA file when told, and reports TLS failures as tls.

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>

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

using namespace capsweep;
using namespace std::chrono_literals;
namespace asio = boost::asio;

namespace {

struct Credentials {
  std::string cert_pem, key_pem;
};

// A self-signed certificate for 127.0.0.1 / localhost, valid for a day.
Credentials make_self_signed() {
  EVP_PKEY* key = EVP_RSA_gen(2048);
  X509* x = X509_new();
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, key);
  X509_NAME* name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("localhost"), -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, x, x, nullptr, nullptr, 0);
  X509_EXTENSION* san = X509V3_EXT_conf_nid(nullptr, &ctx, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
  X509_add_ext(x, san, -1);
  X509_EXTENSION_free(san);
  X509_EXTENSION* bc = X509V3_EXT_conf_nid(nullptr, &ctx, NID_basic_constraints, "critical,CA:TRUE");
  X509_add_ext(x, bc, -1);
  X509_EXTENSION_free(bc);
  X509_sign(x, key, EVP_sha256());
  auto to_pem = [](auto write) {
    BIO* bio = BIO_new(BIO_s_mem());
    write(bio);
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    std::string out(data, static_cast<std::size_t>(n));
    BIO_free(bio);
    return out;
  };
  Credentials c;
  c.cert_pem = to_pem([&](BIO* b) { PEM_write_bio_X509(b, x); });
  c.key_pem = to_pem([&](BIO* b) { PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); });
  X509_free(x);
  EVP_PKEY_free(key);
  return c;
}

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

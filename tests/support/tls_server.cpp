#include "support/tls_server.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>

namespace capsweep::testing {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;

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

struct TlsHttpServer::Impl {
  asio::io_context io;
  asio::ssl::context ssl{asio::ssl::context::tls_server};
  asio::ip::tcp::acceptor acceptor{io};
  std::uint16_t port = 0;
  std::atomic<bool> stop{false};
  std::function<TlsReply(const TlsRequest&)> handler;
  std::thread thread;

  void serve() {
    while (!stop) {
      asio::ssl::stream<asio::ip::tcp::socket> s(io, ssl);
      boost::system::error_code ec;
      acceptor.accept(s.lowest_layer(), ec);
      if (ec || stop) continue;
      s.lowest_layer().set_option(asio::socket_base::receive_buffer_size(1 << 16), ec);
      s.handshake(asio::ssl::stream_base::server, ec);
      if (ec) continue;  // the client refused our certificate
      boost::beast::flat_buffer buffer;
      for (;;) {
        bhttp::request<bhttp::string_body> req;
        bhttp::read(s, buffer, req, ec);
        if (ec) break;
        TlsRequest r{std::string(req.method_string()), std::string(req.target()), req.body(), {}};
        for (const auto& f : req) {
          std::string n(f.name_string());
          for (auto& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          r.headers[n] = std::string(f.value());
        }
        const TlsReply reply = handler(r);
        bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(reply.status), req.version()};
        res.set(bhttp::field::content_type, reply.content_type);
        res.keep_alive(req.keep_alive());
        res.body() = reply.body;
        res.prepare_payload();
        bhttp::write(s, res, ec);
        if (ec || !req.keep_alive()) break;
      }
      s.shutdown(ec);
    }
  }
};

TlsHttpServer::TlsHttpServer(const Credentials& creds, std::function<TlsReply(const TlsRequest&)> handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->handler = std::move(handler);
  impl_->ssl.use_certificate_chain(asio::buffer(creds.cert_pem));
  impl_->ssl.use_private_key(asio::buffer(creds.key_pem), asio::ssl::context::pem);
  impl_->acceptor.open(asio::ip::tcp::v4());
  impl_->acceptor.bind({asio::ip::make_address("127.0.0.1"), 0});
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->thread = std::thread([this] { impl_->serve(); });
}

TlsHttpServer::~TlsHttpServer() {
  impl_->stop = true;
  boost::system::error_code ec;
  asio::ip::tcp::socket poke(impl_->io);
  poke.connect({asio::ip::make_address("127.0.0.1"), impl_->port}, ec);
  impl_->thread.join();
}

std::uint16_t TlsHttpServer::port() const {
  return impl_->port;
}

}  // namespace capsweep::testing

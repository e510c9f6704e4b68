#include "loadgen/endpoint.hpp"

#include <boost/asio/io_context.hpp>

#include "llm/client.hpp"

namespace capsweep::loadgen {

namespace {

class HttpEndpoint final : public Endpoint {
 public:
  HttpEndpoint(boost::asio::io_context& io, const llm::Target& target) : client_(io.get_executor(), target) {}

  boost::asio::awaitable<void> send(std::string body, RequestRecord& rec, SteadyClock::time_point origin,
                                    RequestIds ids) override {
    co_await client_.send(std::move(body), rec, origin, std::move(ids));
  }
  void cancel_all() override { client_.cancel_all(); }
  std::size_t open_connections() const noexcept override { return client_.open_connections(); }

 private:
  llm::Client client_;
};

}  // namespace

EndpointFactory http_endpoint(const llm::Target& target) {
  return [target](boost::asio::io_context& io) -> std::unique_ptr<Endpoint> {
    return std::make_unique<HttpEndpoint>(io, target);
  };
}

}  // namespace capsweep::loadgen

#include "loadgen/endpoint.hpp"

#include <boost/asio/io_context.hpp>
#include <vector>

#include "llm/client.hpp"
#include "llm/target.hpp"

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

// A target of several replicas (target.base_urls): one client each, a request sent to the
// one its record names (rec.replica, chosen by the engine's balance).
class ReplicasEndpoint final : public Endpoint {
 public:
  ReplicasEndpoint(boost::asio::io_context& io, const llm::Target& target) {
    for (std::size_t k = 0; k < target.replicas.size(); ++k)
      replicas_.push_back(std::make_unique<HttpEndpoint>(io, target.at_replica(k)));
  }

  boost::asio::awaitable<void> send(std::string body, RequestRecord& rec, SteadyClock::time_point origin,
                                    RequestIds ids) override {
    Endpoint& to = *replicas_[rec.replica < replicas_.size() ? rec.replica : 0];
    co_await to.send(std::move(body), rec, origin, std::move(ids));
  }
  void cancel_all() override {
    for (auto& r : replicas_) r->cancel_all();
  }
  std::size_t open_connections() const noexcept override {
    std::size_t n = 0;
    for (const auto& r : replicas_) n += r->open_connections();
    return n;
  }

 private:
  std::vector<std::unique_ptr<HttpEndpoint>> replicas_;
};

}  // namespace

EndpointFactory http_endpoint(const llm::Target& target) {
  return [target](boost::asio::io_context& io) -> std::unique_ptr<Endpoint> {
    if (target.replicas.size() > 1) return std::make_unique<ReplicasEndpoint>(io, target);
    return std::make_unique<HttpEndpoint>(io, target);
  };
}

}  // namespace capsweep::loadgen

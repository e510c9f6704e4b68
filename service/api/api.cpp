#include "api/api.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "api/router.hpp"

namespace capsweep::api {

struct Api::Impl {
  explicit Impl(ApiContext c) : env(c), pool(static_cast<std::size_t>(std::max(c.workers, 1))) {}
  ~Impl() { pool.join(); }
  Env env;
  boost::asio::thread_pool pool;  // handlers that touch the store
};

Api::Api(ApiContext ctx) : impl_(std::make_unique<Impl>(ctx)) {}
Api::~Api() = default;

std::vector<std::pair<std::string, std::string>> Api::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& r : route_table()) out.emplace_back(std::string(bhttp::to_string(r.method)), r.pattern);
  return out;
}

http::Handler Api::handler() {
  return [impl = impl_.get()](Request& req, boost::beast::tcp_stream& stream) -> boost::asio::awaitable<http::Reply> {
    namespace asio = boost::asio;
    Env& env = impl->env;
    http::Reply reply;
    const Placement where = placement_of(req);
    if (where == Placement::io_thread) {
      reply.response = dispatch(env, req);  // /healthz: nothing that can block
    } else if (where == Placement::worker) {
      // Run on the pool; the connection's coroutine resumes on its own strand afterwards.
      reply.response = co_await asio::co_spawn(
          impl->pool.get_executor(), [&env, &req]() -> asio::awaitable<Response> { co_return dispatch(env, req); },
          asio::use_awaitable);
    } else {
      const auto started = std::chrono::steady_clock::now();
      Resolved r = co_await asio::co_spawn(
          impl->pool.get_executor(), [&env, &req]() -> asio::awaitable<Resolved> { co_return resolve(env, req); },
          asio::use_awaitable);
      if (r.answer) {
        reply.response = respond(env, req, std::move(*r.answer), r.route_name, started);
      } else {
        // Named, not temporaries: GCC 12 may destroy a temporary of a co_await expression twice.
        const Call call{req, std::move(r.id), std::move(r.query)};
        const boost::asio::any_io_executor pool = impl->pool.get_executor();
        reply = co_await r.route->stream(env, pool, call, stream);
        env.latency.observe(r.route_name,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        co_return reply;
      }
    }
    reply.keep_alive = reply.response->keep_alive();
    co_return reply;
  };
}

}  // namespace capsweep::api

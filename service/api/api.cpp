#include "api/api.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cctype>
#include <chrono>
#include <random>

#include "api/router.hpp"
#include "core/log.hpp"
#include "core/memory.hpp"
#include "core/text.hpp"

namespace capsweep::api {

namespace {

// The client's X-Request-Id when it is a sane token (1-64 of [A-Za-z0-9._-]), else a new one.
std::string request_id_of(const Request& req) {
  const auto given = req["X-Request-Id"];
  const bool sane = !given.empty() && given.size() <= 64 && std::all_of(given.begin(), given.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
  if (sane) return std::string(given);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{:016x}", rng());
}

// One line for each request that changes something (not GET/HEAD) and each answered 5xx:
// what a dashboard polls stays out of the log. A streamed export is logged by the same rule,
// with the status its header carried.
void log_request(const Request& req, unsigned status, std::string_view location, const std::string& id,
                 std::chrono::steady_clock::time_point started) {
  const bool reads = req.method() == bhttp::verb::get || req.method() == bhttp::verb::head;
  if (reads && status < 500) return;
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  log::info(fmt::format("{} {} {}", req.method_string(), printable_ascii(req.target(), 200), status),
            {{"request_id", id},
             {"ms", fmt::format("{:.1f}", ms)},
             {"location", printable_ascii(location.empty() ? "-" : location, 200)}});
}

}  // namespace

// An answer this large leaves enough freed memory behind to be worth handing back.
constexpr std::size_t kLargeAnswerBytes = 64 * 1024;

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
    const auto started = std::chrono::steady_clock::now();
    const std::string request_id = request_id_of(req);
    http::Reply reply;
    RouteMatch match = match_request(req);  // the target parsed once, for placement and dispatch
    const Placement where = placement_of(match);
    if (where == Placement::io_thread) {
      reply.response = dispatch(env, req, std::move(match));  // /healthz, 404, 405: nothing that can block
    } else if (where == Placement::worker) {
      // Run on the pool; the connection's coroutine resumes on its own strand afterwards.
      reply.response = co_await asio::co_spawn(
          impl->pool.get_executor(),
          [&env, &req, &match]() -> asio::awaitable<Response> {
            Response res = dispatch(env, req, std::move(match));
            // A large answer was read through the store's page cache and built from a larger
            // tree of JSON just freed on this worker: hand both back.
            if (res.body().size() >= kLargeAnswerBytes) env.ctx.store->release_memory();
            memory::note_freed(res.body().size());
            co_return res;
          },
          asio::use_awaitable);
    } else {
      Resolved r = co_await asio::co_spawn(
          impl->pool.get_executor(),
          [&env, &req, &match]() -> asio::awaitable<Resolved> { co_return resolve(env, req, std::move(match)); },
          asio::use_awaitable);
      if (r.answer) {
        reply.response = respond(env, req, std::move(*r.answer), r.route_name, started);
      } else {
        // Named, not temporaries: GCC 12 may destroy a temporary of a co_await expression twice.
        const Call call{req, std::move(r.id), std::move(r.query), request_id};
        const boost::asio::any_io_executor pool = impl->pool.get_executor();
        reply = co_await r.route->stream(env, pool, call, stream);
        memory::note_freed(64 * 1024);  // the pages of rows it streamed
        env.latency.observe(r.route_name,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        if (!reply.response) {  // streamed: its header carried the request id and a 200
          log_request(req, 200, "", request_id, started);
          co_return reply;
        }
      }
    }
    reply.response->set("X-Request-Id", request_id);
    log_request(req, reply.response->result_int(), (*reply.response)[bhttp::field::location], request_id, started);
    reply.keep_alive = reply.response->keep_alive();
    co_return reply;
  };
}

}  // namespace capsweep::api

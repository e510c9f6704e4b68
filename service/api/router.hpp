#pragma once
// Internal to api/: the route table ({method, path pattern, role, handler}), bearer-token
// auth, the request guards, and dispatch with its latency record. Routes are data: a path
// that exists with another method answers 405 with Allow, an unknown path 404.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/handlers.hpp"

namespace capsweep::api {

// agent: a load agent's token, good for the agent protocol (/v1/agents/...) only.
enum class Role { none, read, submit, agent };

// A handler that writes its own answer to the connection (a long export in chunks). It runs
// on the connection's strand and moves store work to `pool` itself.
using StreamHandler = boost::asio::awaitable<http::Reply> (*)(Env&, boost::asio::any_io_executor pool, const Call&,
                                                              boost::beast::tcp_stream&);

// A row of the route table, written with named fields: {.method, .pattern, .needs, .handle}
// and the options a route may take.
struct Route {
  bhttp::verb method;
  std::string pattern;  // "/v1/sweeps/{id}/steps"
  Role needs = Role::read;
  Answer (*handle)(Env&, const Call&) = nullptr;
  bool blocking = true;                    // touches the store: run on the worker pool, not the I/O thread
  StreamHandler stream = nullptr;          // when set, used instead of `handle` once the route is resolved
  bool upload = false;                     // takes a file: the dataset size limit, JSONL content types
  std::vector<std::string> segments = {};  // the pattern split at '/', once, when the table is built
};

// A request's target parsed once and matched against the table.
struct RouteMatch {
  bool malformed = false;  // the target is not an origin-form URL
  const Route* route = nullptr;
  std::string id;
  std::map<std::string, std::string> query;
  std::string allow;  // the path's methods, when it exists with another method
};
RouteMatch match_request(const Request& req);

// A request resolved: either its final answer (refused by a guard, unknown route, no auth),
// or the route to run with its call.
struct Resolved {
  std::optional<Answer> answer;
  const Route* route = nullptr;
  std::string id;
  std::map<std::string, std::string> query;
  std::string route_name = "unmatched";
};
Resolved resolve(Env& env, const Request& req, RouteMatch m);
// The response for an answer; records the API latency of the route.
Response respond(Env& env, const Request& req, Answer answer, const std::string& route_name,
                 std::chrono::steady_clock::time_point started);

// The API's routes.
const std::vector<Route>& route_table();

// Where a request is answered: on the I/O thread (/healthz: touches nothing), on the worker
// pool (anything that may touch the store), or by a streaming route on the connection.
enum class Placement { io_thread, worker, stream };
Placement placement_of(const RouteMatch& m);

// Whether the request (its header is enough) is a file upload: its body may be as large as
// limits.max_dataset_bytes rather than limits.max_body_bytes. (Asked before the body is read,
// so the one parse of the target besides the dispatch's.)
bool is_upload(const Request& req);

// Answers one request: guards, route, auth, handler; never throws (a 500 says nothing more).
Response dispatch(Env& env, const Request& req, RouteMatch m);

}  // namespace capsweep::api

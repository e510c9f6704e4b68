#pragma once
// Internal to api/: the route table ({method, path pattern, role, handler}), bearer-token
// auth, the request guards, and dispatch with its latency record. Routes are data: a path
// that exists with another method answers 405 with Allow, an unknown path 404.

#include "api/handlers.hpp"

#include <string>
#include <utility>
#include <vector>

namespace capsweep::api {

enum class Role { none, read, submit };

struct Route {
  bhttp::verb method;
  std::string pattern;  // "/v1/sweeps/{id}/steps"
  Role needs;
  Answer (*handle)(Env&, const Call&);
  bool blocking = true;  // touches the store: run on the worker pool, not the I/O thread
};

// The API's routes.
const std::vector<Route>& route_table();

// The route a request goes to, when its path and method match one; false for /healthz-like
// routes that may run on the I/O thread.
bool needs_worker(const Request& req);

// Answers one request: guards, route, auth, handler; never throws (a 500 says nothing more).
Response dispatch(Env& env, const Request& req);

}  // namespace capsweep::api

#pragma once
// capsweepd's REST API: a route table of {method, path pattern, handler} with bearer-token
// auth and request guards (router.*), one handler file per resource (sweeps.cpp), exports
// (exports.cpp), the service's own endpoints (service_endpoints.cpp), one error mapping
// (errors.*). Errors are {"error": {"code", "message", "field"}}; a 500 body discloses
// nothing. Handlers that touch the database run on a worker pool of the API's own, never on
// the I/O threads, so a locked or slow database cannot stall /healthz or other connections.
// Heavy header (Beast): include from capsweepd's main only.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/config.hpp"
#include "http/server.hpp"
#include "store/store.hpp"
#include "sweep/manager.hpp"

namespace capsweep::api {

struct ApiContext {
  const ServiceConfig* config = nullptr;
  store::Store* store = nullptr;  // the API's own connection
  sweep::SweepManager* manager = nullptr;
  int workers = 4;  // threads of the API's worker pool
};

class Api {
 public:
  explicit Api(ApiContext ctx);
  ~Api();
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;

  // The handler for http::Server; `this` must outlive the server.
  http::Handler handler();
  // The route table as {"METHOD", "/path/{id}"} pairs (documentation is checked against it).
  std::vector<std::pair<std::string, std::string>> routes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsweep::api

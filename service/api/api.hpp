#pragma once
// capsweepd's REST API (DESIGN.md section 6): a route table of {method, path pattern,
// handler}, bearer-token auth, spec validation against schema/sweep-spec.schema.json, and
// capsweepd's own /metrics. Errors are {"error": {"code", "message", "field"}}; a 500 body
// discloses nothing. Heavy header (Beast): include from capsweepd's main only.

#include "api/config.hpp"
#include "http/server.hpp"
#include "store/store.hpp"
#include "sweep/manager.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace capsweep::api {

struct ApiContext {
  const ServiceConfig* config = nullptr;
  store::Store* store = nullptr;              // the API's own connection
  sweep::SweepManager* manager = nullptr;
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

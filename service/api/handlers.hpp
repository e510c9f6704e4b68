#pragma once
// Internal to api/: what the router hands a handler and what every handler may use. One
// handler file per resource (sweeps.cpp), one for exports (exports.cpp), one for the
// service's own endpoints (service_endpoints.cpp). Handlers run on the API's worker pool,
// never on an I/O thread: they may touch the store.

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "api/api.hpp"
#include "api/errors.hpp"
#include "api/schema.hpp"
#include "http/server.hpp"
#include "observe/text_writer.hpp"

namespace capsweep::api {

namespace bhttp = boost::beast::http;
using http::Request;
using http::Response;

// Latency histogram of the API's own requests, per route.
class LatencyHistogram {
 public:
  void observe(const std::string& route, double seconds);
  // Appends the histogram in Prometheus text format.
  void render(std::string& out) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, observe::Histogram> series_;
};

// Shared by every handler; thread-safe (the store and the manager are, the rest is atomic
// or locked).
struct Env {
  explicit Env(ApiContext c) : ctx(c) {}
  ApiContext ctx;
  SchemaValidator spec_validator{job_spec_schema()};
  LatencyHistogram latency;
  std::atomic<std::uint64_t> sweeps_created{0};
  std::atomic<std::uint64_t> sweeps_rejected{0};
  std::atomic<std::uint64_t> requests_refused{0};  // by the request guards (Host, Origin, type)
};

// One routed request: the {id} of the path and the decoded query parameters.
struct Call {
  const Request& req;
  std::string id;
  std::map<std::string, std::string> query;
  std::string request_id = {};  // X-Request-Id: a streamed answer writes it in its own header
};

using Answer = std::variant<Response, ApiError>;

// Answers.
Response json_ok(const Request& req, bhttp::status status, const nlohmann::json& body);
Response text_response(const Request& req, std::string content_type, std::string body, std::string filename = {});
Response no_content(const Request& req);

// A sweep as the API shows it (with live progress while it runs here).
nlohmann::json sweep_view(const Env& env, const store::SweepRow& row);
// Every stored step of a sweep as the API shows it.
nlohmann::json steps_view(const Env& env, const std::string& id);
ApiError no_sweep(const Call& c);
// Fills in each length distribution of a spec document that names a stored dataset's lengths
// ({"dist": "empirical", "dataset": "ds-...", "field": "prompt" | "output"}) with the
// dataset's histogram of that length (values and weights) and its sha256, so the stored spec
// holds the distribution it ran with. nullopt when there is none or all resolved.
std::optional<Error> resolve_dataset_lengths(Env& env, nlohmann::json& doc);

// Handlers, one per route (router.cpp holds the table).
Answer create_sweep(Env& env, const Call& c);
Answer list_sweeps(Env& env, const Call& c);
Answer get_sweep(Env& env, const Call& c);
Answer delete_sweep(Env& env, const Call& c);
Answer get_steps(Env& env, const Call& c);
Answer cancel_sweep(Env& env, const Call& c);
Answer get_steps_csv(Env& env, const Call& c);
Answer get_requests_json(Env& env, const Call& c);
// GET /v1/sweeps/{id}/requests.csv as a chunked stream, a page of rows at a time.
boost::asio::awaitable<http::Reply> stream_requests_csv(Env& env, boost::asio::any_io_executor pool, const Call& c,
                                                        boost::beast::tcp_stream& stream);
// GET /v1/sweeps/{id}/quality.jsonl as a chunked stream, a page of items at a time.
boost::asio::awaitable<http::Reply> stream_quality_jsonl(Env& env, boost::asio::any_io_executor pool, const Call& c,
                                                         boost::beast::tcp_stream& stream);
Answer get_report(Env& env, const Call& c);
Answer get_windows(Env& env, const Call& c);
Answer get_windows_csv(Env& env, const Call& c);
Answer get_autoscale(Env& env, const Call& c);
Answer create_dataset(Env& env, const Call& c);
Answer list_datasets(Env& env, const Call& c);
Answer get_dataset(Env& env, const Call& c);
Answer delete_dataset(Env& env, const Call& c);
Answer healthz(Env& env, const Call& c);
Answer readyz(Env& env, const Call& c);
Answer metrics(Env& env, const Call& c);
// Load agents (agents.cpp): a job's agents as they stand, the Indexed Job that runs them,
// and the agent protocol's routes.
Answer get_agents(Env& env, const Call& c);
Answer get_agents_job(Env& env, const Call& c);
Answer agent_register(Env& env, const Call& c);
Answer agent_clock(Env& env, const Call& c);
Answer agent_poll(Env& env, const Call& c);
Answer agent_heartbeat(Env& env, const Call& c);
Answer agent_records(Env& env, const Call& c);

}  // namespace capsweep::api

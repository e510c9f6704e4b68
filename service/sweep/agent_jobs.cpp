#include "sweep/agent_jobs.hpp"

#include <fmt/format.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "core/error.hpp"
#include "core/text.hpp"
#include "llm/client.hpp"
#include "sweep/agents.hpp"

namespace capsweep::sweep {

namespace {

namespace asio = boost::asio;
using json = nlohmann::json;

constexpr const char* kField = "/agents/kubernetes";

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

struct ApiAnswer {
  int status = 0;
  std::string body;
};

// One request to the Kubernetes API on a connection of its own, with the service account's
// token read at each call (projected tokens are rotated).
Result<ApiAnswer> call(const AgentJobApi& api, const std::string& method, const std::string& path, std::string body) {
  const auto token = read_file(api.token_file);
  if (!token || trimmed(*token).empty()) {
    return Error{errc::unavailable, fmt::format("cannot read the service account token '{}'", api.token_file),
                 std::string(kField) + "/token_file"};
  }
  auto target = llm::parse_base_url(llm::Target{}, api.api_server, std::string(kField) + "/api_server");
  if (!target) return target.error();
  target->headers = {{"Authorization", "Bearer " + trimmed(*token)}, {"Accept", "application/json"}};
  target->ca_file = api.ca_file;
  target->connect_timeout = std::chrono::seconds(5);
  target->read_timeout = std::chrono::seconds(15);
  target->request_timeout = std::chrono::seconds(20);
  target->max_response_bytes = 4 << 20;
  asio::io_context io(1);
  std::optional<llm::Client> client;
  try {
    client.emplace(io.get_executor(), *target);
  } catch (const std::exception& e) {
    return Error{errc::unavailable, fmt::format("the Kubernetes API's CA file '{}': {}", api.ca_file, e.what()),
                 std::string(kField) + "/ca_file"};
  }
  llm::Client::PlainResponse r =
      client->request_now(io, method, path, std::move(body), "agents: a Kubernetes API request failed");
  if (r.status == 0) {
    return Error{
        errc::unavailable,
        fmt::format("the Kubernetes API at {} could not be reached: {}", api.api_server, printable_ascii(r.body)),
        std::string(kField) + "/api_server"};
  }
  return ApiAnswer{r.status, std::move(r.body)};
}

// "HTTP 403 Forbidden: jobs.batch is forbidden: ..." from the API's Status object.
std::string status_text(const ApiAnswer& a) {
  const json s = json::parse(a.body, nullptr, false);
  std::string out = fmt::format("HTTP {}", a.status);
  if (s.is_object()) {
    if (s.contains("reason") && s["reason"].is_string()) out += " " + s["reason"].get<std::string>();
    if (s.contains("message") && s["message"].is_string()) out += ": " + s["message"].get<std::string>();
  }
  return printable_ascii(out);
}

std::string jobs_path(const AgentJobApi& api) {
  return "/apis/batch/v1/namespaces/" + api.namespace_ + "/jobs";
}

errc code_of(int status) {
  return status == 401 ? errc::unauthorized : status == 403 ? errc::forbidden : errc::unavailable;
}

}  // namespace

Result<AgentJobApi> resolve_agent_job_api(AgentJobApi api) {
  if (api.api_server.empty()) {
    const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
    const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
    if (host == nullptr || *host == '\0') {
      return invalid(std::string(kField) + "/api_server",
                     "not in a cluster (KUBERNETES_SERVICE_HOST is not set): set agents.kubernetes.api_server");
    }
    const std::string h = host;
    api.api_server = fmt::format("https://{}:{}", h.find(':') != std::string::npos ? "[" + h + "]" : h,
                                 port != nullptr && *port != '\0' ? port : "443");
  }
  if (auto t = llm::parse_base_url(llm::Target{}, api.api_server, std::string(kField) + "/api_server"); !t) {
    return t.error();
  }
  if (api.namespace_.empty()) {
    const auto ns = read_file(api.namespace_file);
    if (!ns) {
      return invalid(std::string(kField) + "/namespace",
                     fmt::format("cannot read '{}': set agents.kubernetes.namespace", api.namespace_file));
    }
    api.namespace_ = trimmed(*ns);
  }
  if (!rfc1123_label(api.namespace_)) {
    return invalid(std::string(kField) + "/namespace",
                   fmt::format("'{}' is not a namespace name", printable_ascii(api.namespace_)));
  }
  return api;
}

json agent_job_for(const AgentJobApi& api, const std::string& run_id, std::uint32_t agents) {
  AgentJobSettings s;
  s.run_id = run_id;
  s.agents = agents;
  s.image = api.image;
  s.server = api.server;
  s.secret = api.secret;
  s.secret_key = api.secret_key;
  s.namespace_ = api.namespace_;
  s.backoff_per_index = api.backoff_per_index;
  return agent_job(s);
}

Result<std::string> create_agent_job(const AgentJobApi& api, const json& job) {
  const std::string name = job.at("metadata").at("name").get<std::string>();
  auto a = call(api, "POST", jobs_path(api), job.dump());
  if (!a) return a.error();
  if (a->status == 200 || a->status == 201 || a->status == 202) return std::string("created");
  if (a->status == 409) {
    // Already there: this run's own Job (a run resumed) is kept; another's is not touched.
    auto got = call(api, "GET", jobs_path(api) + "/" + name, "");
    if (!got) return got.error();
    const json j = json::parse(got->body, nullptr, false);
    const json want = job["metadata"]["labels"]["capsweep.dev/run"];
    if (got->status == 200 && j.is_object() && j.contains("metadata") && j["metadata"].contains("labels") &&
        j["metadata"]["labels"].value("capsweep.dev/run", json()) == want) {
      return std::string("exists");
    }
    return Error{
        errc::conflict,
        fmt::format("a Job named {} in namespace {} is not this run's ({})", name, api.namespace_, status_text(*got)),
        kField};
  }
  return Error{code_of(a->status),
               fmt::format("the Kubernetes API refused to create Job {} in namespace {}: {}", name, api.namespace_,
                           status_text(*a)),
               kField};
}

Result<std::string> delete_agent_job(const AgentJobApi& api, const std::string& name) {
  auto a = call(api, "DELETE", jobs_path(api) + "/" + name + "?propagationPolicy=Background", "");
  if (!a) return a.error();
  if (a->status == 200 || a->status == 202) return std::string("deleted");
  if (a->status == 404) return std::string("gone");
  return Error{code_of(a->status),
               fmt::format("the Kubernetes API refused to delete Job {} in namespace {}: {}", name, api.namespace_,
                           status_text(*a)),
               kField};
}

}  // namespace capsweep::sweep

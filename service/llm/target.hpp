#pragma once
// The endpoint under test, as a job spec's "target" object describes it, converted once at the
// edge into plain settings: URL parts, API flavour, model, headers, TLS and deadlines.

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/time.hpp"
#include "llm/api_table.hpp"

namespace capsweep::llm {

// One of the models a target serves (target.models: LoRA adapters behind one base model, or
// models behind one gateway) and its share of the requests.
struct ModelShare {
  std::string name;
  double weight = 1;
};

// One of the servers a target's requests are spread over (target.base_urls): its URL as given
// (its name in every figure and outage) and its parts.
struct Replica {
  std::string url;
  std::string scheme, host;
  std::uint16_t port = 0;
  std::string base_path;
};

// How requests are spread over replicas: request (session) i to replica i mod n, or each to
// the replica with the fewest of this generator's requests in flight.
enum class Balance : std::uint8_t { round_robin, least_in_flight };

struct Target {
  std::string scheme = "http";  // "http" | "https"
  std::string host = "127.0.0.1";
  std::uint16_t port = 8000;
  std::string base_path;  // prefix before /v1/..., without a trailing '/'
  // target.base_urls: the replicas, the first's parts also above (empty: base_url alone).
  std::vector<Replica> replicas;
  Balance balance = Balance::round_robin;
  Api api = Api::completions;
  std::string path;   // target.path: the request path below base_path, where it is not the API's own
  std::string model;  // the model (with `models`: the first of them)
  // target.models: request i's model drawn by weight from the seed (empty: `model` alone).
  std::vector<ModelShare> models;
  std::vector<std::pair<std::string, std::string>> headers;  // secrets: never logged
  nlohmann::json extra_body = nlohmann::json::object();      // merged into every request body
  bool stream = true;
  bool ignore_eos = true;
  bool verify_tls = true;
  std::string ca_file;  // PEM file of extra trusted CAs
  // Set by the service, not the spec: what a target may send before it counts as an error.
  std::uint64_t max_response_bytes = 16 << 20;  // one answer (a stream in all)
  std::size_t max_sse_event_bytes = 1 << 20;    // one SSE event
  // Set by the service: whether an address ("127.0.0.1", "::1") may be connected to; every
  // resolved address is checked before connecting (none allowed: a connect failure).
  std::function<bool(std::string_view address)> allow_address;
  Nanos connect_timeout = std::chrono::seconds(10);
  Nanos read_timeout = std::chrono::seconds(60);      // longest silence while reading
  Nanos request_timeout = std::chrono::seconds(600);  // whole request

  bool tls() const noexcept { return scheme == "https"; }
  // The replicas' count: 1 for a target of one base_url.
  std::size_t replica_count() const noexcept { return replicas.empty() ? 1 : replicas.size(); }
  // The target as replica `k` serves it: its scheme, host, port and base path, the rest shared.
  Target at_replica(std::size_t k) const;
  // The replicas' URLs, for each one's figures; none for a target of one base_url.
  std::vector<std::string> replica_urls() const;
  // The model `unit` (a request's index, a session's id) of a run seeded `seed` asks for: its
  // index in `models`, drawn by weight (0 without models).
  std::uint16_t model_for(std::uint64_t seed, std::uint64_t unit) const noexcept;
  // The request path of the completion endpoint.
  std::string completion_path() const;
};

// Parses "http://host:port/prefix" into scheme, host, port and base path.
Result<Target> parse_base_url(Target t, std::string_view url, const std::string& field);

// The most replicas one target spreads its requests over (target.base_urls).
inline constexpr std::size_t kMaxReplicas = 64;

// Parses the spec's target object: {"base_url" or "base_urls": [...] with "balance", "api" (a
// row of the API table), "path", "model" or "models": [{"name", "weight"}],
// "headers": {...}, "extra_body": {...}, "stream", "ignore_eos", "tls": {"verify", "ca_file"},
// "timeouts": {"connect_s", "read_s", "request_s"}}. Errors carry a JSON pointer below `field`;
// extra_body may not set a field that defines the load (model, prompt, messages, stream,
// max_tokens, n, best_of, ignore_eos, ...): "/target/extra_body/n".
Result<Target> parse_target(const nlohmann::json& j, const std::string& field = "/target");

// The JSON body of one completion request for `prompt` (completions) or a single user
// message (chat), with streaming, usage options, ignore_eos and extra_body merged. A chat
// target given `messages` (a JSON array text from a dataset) sends those messages instead.
// `continues`: a turn of a conversation the server keeps (the API's row's keep_state), the id
// of the answer it continues ("" for the first turn).
std::string completion_body(const Target& t, std::string_view prompt, std::uint32_t max_tokens,
                            std::string_view messages = {}, std::optional<std::string_view> continues = std::nullopt);
// The same from everything a request sends (its items too: embeddings' inputs, rerank's
// documents). An API that generates no tokens gets no stream, stream_options or ignore_eos.
std::string request_body(const Target& t, const RequestText& text,
                         std::optional<std::string_view> continues = std::nullopt);

}  // namespace capsweep::llm

#include "api/startup.hpp"

#include <fmt/format.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api/router.hpp"
#include "core/log.hpp"

namespace capsweep::api {

namespace {

std::vector<std::string> split_commas(const std::string& csv) {
  std::vector<std::string> entries;
  std::stringstream ss(csv);
  for (std::string e; std::getline(ss, e, ',');) {
    if (!e.empty()) entries.push_back(e);
  }
  return entries;
}

// A settings file's document ({} without a file); nullopt after printing why it is unusable.
std::optional<nlohmann::json> read_json_file(const std::string& path, const char* what) {
  if (path.empty()) return nlohmann::json::object();
  std::ifstream in(path);
  if (!in) {
    fmt::print(stderr, "capsweepd: cannot read {} {}\n", what, path);
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto doc = nlohmann::json::parse(text.str(), nullptr, false);
  if (doc.is_discarded()) {
    fmt::print(stderr, "capsweepd: {} is not valid JSON\n", path);
    return std::nullopt;
  }
  return doc;
}

}  // namespace

namespace {

// capsweepd's flags, as given (empty or zero: not given).
struct Flags {
  std::string config_path, tokens_path, listen, db, allow_csv, log_format = "text";
  int max_concurrent = 0;
  bool insecure_no_auth = false;
};

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--config", f.config_path, "JSON settings file (schema/config.schema.json); flags override it");
  app.add_option("--listen", f.listen, "HOST:PORT to serve the API on (default 127.0.0.1:8080)");
  app.add_option("--db", f.db, "SQLite database file (default capsweep.db)");
  app.add_option("--max-concurrent-sweeps", f.max_concurrent, "sweeps running at once (each on its own target)")
      ->check(CLI::Range(1, 64));
  app.add_option("--allow-targets", f.allow_csv, "comma-separated hosts/CIDRs sweeps may target (default loopback)");
  app.add_option("--tokens-file", f.tokens_path,
                 "JSON file holding the tokens array (e.g. a mounted Secret); replaces the config file's tokens");
  app.add_option("--log-format", f.log_format, "log lines as text, logfmt or json")
      ->check(CLI::IsMember({"text", "logfmt", "json"}));
  app.add_flag("--insecure-no-auth", f.insecure_no_auth,
               "serve a non-loopback address without bearer tokens (refused otherwise)");
}

// The settings document: the config file's, the tokens file's tokens, then the flags over it;
// nullopt (the reason printed) when a file cannot be read.
std::optional<nlohmann::json> settings_document(const Flags& f) {
  auto doc = read_json_file(f.config_path, "config file");
  if (!doc) return std::nullopt;
  if (!f.tokens_path.empty()) {
    auto tokens = read_json_file(f.tokens_path, "tokens file");
    if (!tokens) return std::nullopt;
    if (!tokens->is_array()) {
      fmt::print(stderr, "capsweepd: tokens file {}: must hold a JSON array of {{\"token\", \"role\", \"name\"}}\n",
                 f.tokens_path);
      return std::nullopt;
    }
    (*doc)["tokens"] = std::move(*tokens);
  }
  if (!f.listen.empty()) (*doc)["listen"] = f.listen;
  if (f.insecure_no_auth) (*doc)["insecure_no_auth"] = true;
  if (!f.db.empty()) (*doc)["db"] = f.db;
  if (f.max_concurrent > 0) (*doc)["max_concurrent_sweeps"] = f.max_concurrent;
  if (!f.allow_csv.empty()) (*doc)["allow_targets"] = split_commas(f.allow_csv);
  return doc;
}

}  // namespace

std::variant<Startup, int> startup_from_command_line(int argc, char** argv) {
  CLI::App app{"capsweepd: finds the highest request rate an LLM endpoint serves within its SLO"};
  Flags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  log::set_format(*log::parse_format(flags.log_format));
  auto doc = settings_document(flags);
  if (!doc) return 2;
  auto config = parse_config(*doc);
  if (!config) {
    fmt::print(stderr, "capsweepd: config {}: {}\n", config.error().field, config.error().message);
    return 2;
  }
  if (config->agent_jobs.apply) {
    auto api = sweep::resolve_agent_job_api(config->agent_jobs);
    if (!api) {
      fmt::print(stderr, "capsweepd: config {}: {}\n", api.error().field, api.error().message);
      return 2;
    }
    config->agent_jobs = std::move(*api);
  }
  auto endpoint = http::parse_listen_address(config->listen);
  if (!endpoint) {
    fmt::print(stderr, "capsweepd: --listen: {}\n", endpoint.error().message);
    return 2;
  }
  if (!endpoint->address().is_loopback() && config->tokens.empty() && !config->insecure_no_auth) {
    fmt::print(stderr,
               "capsweepd: refusing to serve {} without tokens: anyone who can connect could aim load at your "
               "targets. Configure \"tokens\", listen on loopback, or pass --insecure-no-auth.\n",
               config->listen);
    return 2;
  }
  fit_descriptor_limit(*config);
  tune_allocator();
  // The database (job specs, target URLs and their results) is the service user's alone:
  // files it creates are 0600 whatever umask it was started with.
  umask(S_IRWXG | S_IRWXO);
  return Startup{std::move(*config), *endpoint};
}

void without_thread_cache(char** argv) {
#if defined(__GLIBC__)
  const char* set = std::getenv("GLIBC_TUNABLES");
  std::string tunables = set ? set : "";
  if (tunables.find("glibc.malloc.tcache_count") != std::string::npos) return;  // the operator's, or done
  tunables += (tunables.empty() ? "" : ":") + std::string("glibc.malloc.tcache_count=0");
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GLIBC_TUNABLES");  // no /proc: run on as started, with the cache
  if (set) setenv("GLIBC_TUNABLES", set, 1);
#else
  (void)argv;
#endif
}

void tune_allocator() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);  // blocks this large are mapped alone and unmapped when freed
  // A heap top larger than this is handed back on a large free; the step runner frees one
  // large block on its thread at the end of a step, so its arena's top shrinks to this.
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  mallopt(M_TOP_PAD, 64 * 1024);
#endif
}

std::size_t api_connection_room(std::uint64_t nofile, std::uint64_t open_now, const ServiceConfig& c) {
  constexpr std::uint64_t kInternal = 24;  // database and journal, log, event loop, listeners, probes
  constexpr std::size_t kFloor = 4;        // probes and an admin request always have room
  const std::uint64_t sweeps = static_cast<std::uint64_t>(c.max_concurrent_sweeps) *
                               (static_cast<std::uint64_t>(c.limits.max_connections_per_sweep) + 8);
  const std::uint64_t used = open_now + kInternal + sweeps;
  const std::uint64_t room = nofile > used ? nofile - used : 0;
  return std::clamp<std::size_t>(static_cast<std::size_t>(std::min<std::uint64_t>(room, SIZE_MAX)), kFloor,
                                 std::max(kFloor, c.limits.max_api_connections));
}

namespace {
std::uint64_t open_descriptors() {
  std::error_code ec;
  std::uint64_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec); !ec && it != decltype(it)();
       it.increment(ec)) {
    ++n;
  }
  return n;
}
}  // namespace

void fit_descriptor_limit(ServiceConfig& c) {
  // API connections, every sweep's connections to its target, and the database, logs, etc.
  const auto need = static_cast<rlim_t>(c.limits.max_api_connections) +
                    static_cast<rlim_t>(c.max_concurrent_sweeps) * (c.limits.max_connections_per_sweep + 8) + 64;
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < need && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = std::min(need, lim.rlim_max);
    setrlimit(RLIMIT_NOFILE, &lim);
    getrlimit(RLIMIT_NOFILE, &lim);
  }
  if (lim.rlim_cur < need) {
    // The API keeps what the limit leaves room for, so that accept never runs out of
    // descriptors: a connection over that cap takes an idle one's place or gets a 503, and a
    // probe always gets in.
    const std::size_t room = api_connection_room(lim.rlim_cur, open_descriptors(), c);
    fmt::print(stderr,
               "capsweepd: notice: the open-file limit {} is below the {} the configured limits may use "
               "(limits.max_api_connections + sweeps x limits.max_connections_per_sweep); the API takes at most {} "
               "connections at once (of limits.max_api_connections {}); raise the limit (LimitNOFILE=) or lower "
               "those\n",
               static_cast<unsigned long long>(lim.rlim_cur), static_cast<unsigned long long>(need), room,
               c.limits.max_api_connections);
    c.limits.max_api_connections = room;
  }
}

sweep::ManagerOptions manager_options(const ServiceConfig& c) {
  sweep::ManagerOptions mo;
  mo.db_path = c.db;
  mo.max_concurrent_sweeps = c.max_concurrent_sweeps;
  mo.max_total_sweep = std::chrono::seconds(static_cast<long>(c.limits.max_total_sweep_s));
  mo.max_connections = c.limits.max_connections_per_sweep;
  mo.engine_threads = c.engine_threads;
  mo.allow_host = [allow = c.allow](std::string_view host) { return allow.allows(host); };
  mo.max_response_bytes = c.limits.max_response_bytes;
  mo.max_sse_event_bytes = c.limits.max_sse_event_bytes;
  mo.retention_max_age_s = c.retention.max_age_days * 86400;
  mo.retention_max_sweeps = c.retention.max_sweeps;
  mo.agents_max_clock_error = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double, std::milli>(c.agents_max_clock_error_ms));
  mo.agents_join_timeout =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(c.agents_join_timeout_s));
  mo.agent_jobs = c.agent_jobs;
  return mo;
}

http::ServerOptions server_options(const ServiceConfig& c) {
  http::ServerOptions so;
  so.body_limit = c.limits.max_body_bytes;
  so.body_limit_for = [spec = c.limits.max_body_bytes, upload = c.limits.max_dataset_bytes](const http::Request& h) {
    return is_upload(h) ? upload : spec;
  };
  so.server_name = "capsweepd";
  so.max_connections = c.limits.max_api_connections;
  so.max_connections_per_client = c.limits.max_api_connections_per_client;
  so.header_timeout = std::chrono::milliseconds(static_cast<long>(c.limits.header_timeout_s * 1000));
  return so;
}

}  // namespace capsweep::api

#pragma once
// capsweepd's start-up settings: the config file (schema/config.schema.json) with the command
// line over it, checked as a whole (a non-loopback address needs tokens or an explicit
// --insecure-no-auth), and turned into the options of the parts main() wires together.

#include <variant>

#include "api/config.hpp"
#include "http/server.hpp"
#include "sweep/manager.hpp"

namespace capsweep::api {

struct Startup {
  ServiceConfig config;
  boost::asio::ip::tcp::endpoint endpoint;  // where to listen
};

// Parses the command line and the config file it names. Returns the settings, or the exit
// code when the program should end now (0 after --help; 2 for a bad flag, file or value, with
// the reason printed to stderr).
std::variant<Startup, int> startup_from_command_line(int argc, char** argv);

// The API connections the open-file limit `nofile` leaves room for beside `open_now`
// descriptors, the service's own and every sweep's target connections: at least 4 (probes and
// an admin request), at most limits.max_api_connections.
std::size_t api_connection_room(std::uint64_t nofile, std::uint64_t open_now, const ServiceConfig& c);
// Raises the open-file soft limit towards what the configured limits may use (API connections
// plus every sweep's target connections); when the hard limit is lower, says so at start-up and
// lowers limits.max_api_connections to api_connection_room.
void fit_descriptor_limit(ServiceConfig& c);

// glibc's per-thread cache keeps up to seven freed blocks of every small size for each thread;
// to the arena they are in use, so each pins the page it lies on and a trim cannot hand those
// pages back. An API worker that built one large answer would then keep about a megabyte
// resident for good. glibc reads this setting only when a process starts: capsweepd starts
// itself again at once with the cache off (GLIBC_TUNABLES glibc.malloc.tcache_count=0),
// unless the operator's environment sets the count already. Returns only when it did not
// re-execute (already done, set by the operator, or no /proc). No-op elsewhere.
void without_thread_cache(char** argv);

// Fixes glibc's allocator thresholds so that memory freed after a step goes back to the system:
// left dynamic, the first large block freed (a step's rows) raises the mmap and trim thresholds
// to its size, after which large blocks live in thread arenas whose tops malloc_trim does not
// shrink, and resident memory keeps the high-water mark of the largest step. No-op elsewhere.
void tune_allocator();

// The options of the parts, from the settings.
sweep::ManagerOptions manager_options(const ServiceConfig& c);
http::ServerOptions server_options(const ServiceConfig& c);

}  // namespace capsweep::api

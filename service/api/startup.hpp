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

// Raises the open-file soft limit towards what the configured limits may use (API connections
// plus every sweep's target connections); prints a notice when the hard limit is lower.
void fit_descriptor_limit(const ServiceConfig& c);

// Fixes glibc's allocator thresholds so that memory freed after a step goes back to the system:
// left dynamic, the first large block freed (a step's rows) raises the mmap and trim thresholds
// to its size, after which large blocks live in thread arenas whose tops malloc_trim does not
// shrink, and resident memory keeps the high-water mark of the largest step. No-op elsewhere.
void tune_allocator();

// The options of the parts, from the settings.
sweep::ManagerOptions manager_options(const ServiceConfig& c);
http::ServerOptions server_options(const ServiceConfig& c);

}  // namespace capsweep::api

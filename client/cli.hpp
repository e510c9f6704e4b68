#pragma once
// The capsweep command line (CLI11): subcommands, options, and the environment
// (CAPSWEEP_SERVER, CAPSWEEP_TOKEN).

#include <variant>

#include "commands.hpp"

namespace capsweep::cli {

// The parsed arguments, or the exit code to end with (after --help, or a usage error that
// has been printed).
std::variant<Args, int> parse_args(int argc, char** argv);

}  // namespace capsweep::cli

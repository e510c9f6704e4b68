#pragma once
// capsweep-llmsim's command line: settings from --config FILE (read first), then flags.

#include <variant>

#include "llmsim/config.hpp"

namespace capsweep::llmsim {

// The settings, validated; or the exit code to end with (after --help, or an error printed).
std::variant<SimConfig, int> parse_options(int argc, char** argv);

}  // namespace capsweep::llmsim

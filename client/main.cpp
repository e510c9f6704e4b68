// capsweep: the command-line client of capsweepd. Only wiring here: the arguments (cli.cpp)
// and the command they name (commands.cpp), whose exit code is the program's.

#include <variant>

#include "cli.hpp"

int main(int argc, char** argv) {
  auto parsed = capsweep::cli::parse_args(argc, argv);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  return capsweep::cli::run_command(std::get<capsweep::cli::Args>(parsed));
}

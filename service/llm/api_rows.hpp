#pragma once
// The rows the target-API table starts with beyond completions and chat, each defined in its
// own file (api_<name>.cpp); api_table.cpp lists them in Api's order.

#include "llm/api_table.hpp"

namespace capsweep::llm {

ApiRow responses_row();  // api_responses.cpp

}  // namespace capsweep::llm

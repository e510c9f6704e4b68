#pragma once
// How many tokens a word of the prompt synthesiser makes on the target, asked before a job's
// first step so that prompts are the spec's lengths in the target's own tokens.

#include <functional>
#include <string>

#include "llm/target.hpp"

namespace capsweep::loadgen {

// Calibrates tokens per word of the synthesiser's word list against the target: POST
// /tokenize when it answers, else one completion's usage.prompt_tokens. Returns 1.0 with a
// note in `how` when neither works. Each request is bounded to 30 s; `should_stop` (polled
// every 50 ms) abandons the calibration.
double calibrate_tokens_per_word(const llm::Target& target, std::string& how,
                                 const std::function<bool()>& should_stop = {});

}  // namespace capsweep::loadgen

#pragma once
// What capsweep-llmsim answers besides its word stream, so that a regression job's quality
// checks can be rehearsed: a JSON object for response_format json_object, an instance of the
// schema for json_schema, a call of an offered tool (arguments an instance of its parameters
// schema) when tools are given, and the result of an arithmetic question ("What is 12 + 30?").
// The same request gets the same answer (temperature 0, or a seed), and each fault of the
// configuration breaks its kind of answer at its rate, the same answers every time (a fault
// is the model's; only the nondeterminism fault varies an answer from one asking to the next).

#include <nlohmann/json.hpp>

#include "core/random.hpp"
#include "llmsim/config.hpp"
#include "llmsim/openai.hpp"

namespace capsweep::llmsim {

// Sets req.script (and the overrun and sampling faults) for the request; `rng` draws the
// faults. Leaves the word stream for a request that asks for nothing structured.
void script_answer(CompletionRequest& req, const SimConfig& cfg, Rng& rng);

// A value valid against `schema` (draft 7: type, properties and required, items and minItems,
// enum, const, minimum and maximum, minLength; the first of anyOf/oneOf/allOf), drawn from
// `seed`. Regular-expression keywords are not honoured.
nlohmann::json instance_of(const nlohmann::json& schema, std::uint64_t seed, int depth = 0);

// The result of the first "A op B" (integers, op one of + - * x) in `text`; nullopt when none.
std::optional<long long> arithmetic_answer(std::string_view text);

// `text` cut into pieces of about four bytes, one per token.
std::vector<std::string> token_pieces(std::string_view text);

}  // namespace capsweep::llmsim

// Fuzz target: the whole spec path of POST /v1/sweeps on arbitrary bytes — the nesting bound,
// JSON parsing, schema validation, defaults, the spec parser with its cross-field checks, the
// secrets split and join, and the store round trip of what would be stored. Nothing may crash,
// hang or recurse without bound; what is stored must read back identical.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/guard.hpp"
#include "api/schema.hpp"
#include "store/store.hpp"
#include "sweep/spec.hpp"

using json = nlohmann::json;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const capsweep::api::SchemaValidator validator(capsweep::api::embedded_schema("sweep-spec.schema.json"));
  static capsweep::store::Store store(":memory:");
  static std::uint64_t n = 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (capsweep::api::json_too_deep(text, 64)) return 0;  // refused before parsing, as the API does
  json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return 0;
  if (!validator.validate(doc)) return 0;
  validator.apply_defaults(doc);
  auto spec = capsweep::sweep::parse_job_spec(doc);
  if (!spec) return 0;
  auto split = capsweep::sweep::split_secrets(doc);
  // The secrets go back exactly where they came from.
  if (capsweep::sweep::join_secrets(split.visible, split.secret_headers) != doc) std::abort();
  capsweep::store::SweepRow row;
  row.id = "sw-fuzz-" + std::to_string(n++);
  row.name = spec->name;
  row.target_key = spec->base_url;
  row.spec = split.visible;
  row.secret_headers = split.secret_headers;
  store.insert_sweep(row);
  auto back = store.sweep(row.id);
  if (!back || back->name != row.name || back->target_key != row.target_key) std::abort();
  // Stored text is written with invalid UTF-8 replaced: compare through the same dump.
  const auto text_of = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  if (text_of(back->spec) != text_of(row.spec) || text_of(back->secret_headers) != text_of(row.secret_headers))
    std::abort();
  store.delete_sweep(row.id);
  return 0;
}

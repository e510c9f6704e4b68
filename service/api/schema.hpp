#pragma once
// JSON Schema (draft 7) validation with valijson against the schemas under schema/, compiled
// into the binary. Errors name the most specific failing field as a JSON pointer, in the
// same shape as every other API error.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/error.hpp"

namespace capsweep::api {

class SchemaValidator {
 public:
  // Compiles a schema document; throws std::invalid_argument when the schema itself is bad.
  explicit SchemaValidator(const nlohmann::json& schema);
  ~SchemaValidator();
  SchemaValidator(SchemaValidator&&) noexcept;
  SchemaValidator& operator=(SchemaValidator&&) noexcept;

  // Ok, or the first most specific error: field "/target/base_url", message from the schema.
  Result<void> validate(const nlohmann::json& instance) const;
  // Fills absent properties that have a "default" in the schema, recursively through objects
  // that are present (or were just defaulted). Call after validate().
  void apply_defaults(nlohmann::json& instance) const;
  const nlohmann::json& document() const noexcept { return doc_; }

 private:
  struct Impl;
  nlohmann::json doc_;
  std::unique_ptr<Impl> impl_;
};

// The schema files compiled in, by file name ("sweep-spec.schema.json", ...); throws
// std::out_of_range for an unknown name.
const nlohmann::json& embedded_schema(std::string_view file_name);
// The job spec's schema: sweep-spec.schema.json with every kind in the kinds table (its name in
// "kind"'s enum, the schemas of the blocks it brings).
nlohmann::json job_spec_schema();
// The text of any embedded schema file (openapi.yaml included).
std::string_view embedded_schema_text(std::string_view file_name);

}  // namespace capsweep::api

#pragma once
// A JSON object's top-level members read without building a document: each member's raw text
// (values skipped by structure, strings with their escapes, nesting counted), so that an
// answer's few small fields are found without parsing its large ones (a stream's events per
// token, an embeddings answer's vectors).

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace capsweep::llm {

class JsonMembers {
 public:
  // Reads one object (white space around it allowed, nothing else); false when it is not one.
  bool parse(std::string_view object);
  // A member's raw value: a string's with its quotes (see unquote), an object's or array's
  // whole text; "" when absent or past the first kMaxMembers members.
  std::string_view get(std::string_view key) const noexcept;
  static constexpr std::size_t kMaxMembers = 32;

 private:
  struct Member {
    std::string_view key, value;
  };
  std::array<Member, kMaxMembers> members_{};
  std::size_t count_ = 0;
};

// A quoted raw string's contents, still escaped ("" for anything else).
std::string_view unquote(std::string_view raw) noexcept;

// How many elements a raw JSON array holds (its elements skipped by structure); nullopt when
// it is not an array.
std::optional<std::size_t> count_elements(std::string_view array);

}  // namespace capsweep::llm

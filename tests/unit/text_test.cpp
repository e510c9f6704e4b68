#include "core/text.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace capsweep;

TEST_CASE("text: lines are numbered from 1, CR of CRLF dropped, last line without newline kept") {
  std::vector<std::pair<std::string, std::size_t>> seen;
  const bool all = for_each_line("a\r\nb\n\nc", [&](std::string_view line, std::size_t n) {
    seen.emplace_back(std::string(line), n);
    return true;
  });
  CHECK(all);
  REQUIRE(seen.size() == 4);
  CHECK(seen[0] == std::make_pair(std::string("a"), std::size_t{1}));
  CHECK(seen[1].first == "b");
  CHECK(seen[2].first.empty());
  CHECK(seen[3] == std::make_pair(std::string("c"), std::size_t{4}));
}

TEST_CASE("text: returning false stops the walk") {
  int calls = 0;
  CHECK_FALSE(for_each_line("1\n2\n3\n", [&](std::string_view, std::size_t n) {
    ++calls;
    return n < 2;
  }));
  CHECK(calls == 2);
  CHECK(for_each_line("", [](std::string_view, std::size_t) { return false; }));
}

TEST_CASE("text: words are runs of non-whitespace") {
  CHECK(count_words("") == 0);
  CHECK(count_words("   ") == 0);
  CHECK(count_words("one") == 1);
  CHECK(count_words(" two  words\t\n") == 2);
  CHECK(count_words("a\vb\fc\rd") == 4);
  static_assert(count_words("compile time too") == 3);
}

TEST_CASE("text: printable_ascii keeps what a terminal and JSON can show, cut to a length") {
  CHECK(printable_ascii("plain text 123") == "plain text 123");
  CHECK(printable_ascii("\x1b[2J\x1b]0;owned\x07name") == "?[2J?]0;owned?name");
  CHECK(printable_ascii("\xff\xfe bytes") == "?? bytes");
  CHECK(printable_ascii("caf\xc3\xa9") == "caf??");
  CHECK(printable_ascii("line\nbreak\ttab") == "line?break?tab");
  CHECK(printable_ascii(std::string(500, 'x'), 10) == std::string(10, 'x'));
  CHECK(printable_ascii("") == "");
}

TEST_CASE("text: percent_encode keeps unreserved bytes and encodes the rest") {
  CHECK(capsweep::percent_encode("sum(up{a=\"b c\"})") == "sum%28up%7Ba%3D%22b%20c%22%7D%29");
  CHECK(capsweep::percent_encode("A-z_0.9~") == "A-z_0.9~");
  CHECK(capsweep::percent_encode("\xff\n") == "%FF%0A");
  CHECK(capsweep::percent_encode("").empty());
}

// Fuzz target: what the API reads from a request before any handler — the request target
// (Boost.URL origin form, decoded segments and parameters) and the Host, Origin and
// Content-Type guards — on arbitrary bytes split into those parts at NUL bytes.
#include <boost/url/parse.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/guard.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= all.size(); ++i) {
    if (i == all.size() || all[i] == '\0') {
      parts.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  }
  parts.resize(4);
  static const capsweep::api::AllowList names = capsweep::api::AllowList::parse({"capsweep.example"}).value();
  if (auto url = boost::urls::parse_origin_form(parts[0])) {
    std::size_t bytes = 0;
    for (auto seg : url->segments()) bytes += seg.size();
    for (auto p : url->params()) bytes += p.key.size() + p.value.size();
    (void)bytes;
  }
  (void)capsweep::api::check_host(parts[1], names, "127.0.0.1");
  (void)capsweep::api::check_origin(parts[2], names, "127.0.0.1");
  (void)capsweep::api::check_json_content_type(parts[3], parts[0].size());
  (void)capsweep::api::json_too_deep(all, 64);
  (void)capsweep::api::host_of(parts[1]);
  return 0;
}

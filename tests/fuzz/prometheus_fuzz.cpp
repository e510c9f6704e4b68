// libFuzzer target: the Prometheus text parser on arbitrary input.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "observe/prometheus.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto r = capsweep::observe::parse_prometheus_text(std::string_view(reinterpret_cast<const char*>(data), size));
  if (r) {
    for (const auto& s : r->samples) (void)s.label("le");
  }
  return 0;
}

// libFuzzer target: the SSE parser fed in random splits, each event through the OpenAI chunk
// scanner. Must never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "llm/openai_stream.hpp"
#include "llm/sse.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  // The first byte picks the split size, the rest is the stream.
  const std::size_t piece = 1 + data[0] % 64;
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  capsweep::llm::SseParser parser(1 << 16);
  for (std::size_t i = 0; i < bytes.size(); i += piece) {
    if (!parser.feed(bytes.substr(i, piece),
                     [](std::string_view event) { (void)capsweep::llm::interpret_chunk(event); })) {
      break;
    }
  }
  (void)capsweep::llm::interpret_chunk(bytes);
  return 0;
}

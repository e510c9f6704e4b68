#include "core/record.hpp"

namespace capsweep {

std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::ok:
      return "ok";
    case Outcome::connect:
      return "connect";
    case Outcome::tls:
      return "tls";
    case Outcome::timeout:
      return "timeout";
    case Outcome::http_4xx:
      return "http_4xx";
    case Outcome::http_5xx:
      return "http_5xx";
    case Outcome::stream_error:
      return "stream_error";
    case Outcome::empty_stream:
      return "empty_stream";
    case Outcome::cancelled:
      return "cancelled";
    case Outcome::incomplete:
      return "incomplete";
    case Outcome::client_error:
      return "client_error";
    case Outcome::abandoned:
      return "abandoned";
    case Outcome::truncated:
      return "truncated";
  }
  return "unknown";
}

}  // namespace capsweep

#include "core/error.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/log.hpp"

namespace capsweep {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::parse_error:
      return "parse_error";
    case errc::not_found:
      return "not_found";
    case errc::conflict:
      return "conflict";
    case errc::forbidden:
      return "forbidden";
    case errc::unavailable:
      return "unavailable";
    case errc::unauthorized:
      return "unauthorized";
    case errc::method_not_allowed:
      return "method_not_allowed";
    case errc::too_many_requests:
      return "too_many_requests";
    case errc::payload_too_large:
      return "payload_too_large";
    case errc::internal:
      return "internal";
  }
  return "unknown";
}

Error invalid(std::string field, std::string message) {
  return Error{errc::invalid_argument, std::move(message), std::move(field)};
}

ErrorException::ErrorException(Error e) : error_(std::move(e)) {
  what_ = error_.field.empty() ? error_.message : error_.field + ": " + error_.message;
}

void throw_exception_from_error(const Error& e, const boost::source_location&) {
  throw ErrorException(e);
}

void log_escaped(const char* who, std::exception_ptr e) {
  if (!e) return;
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    log::error(fmt::format("{}: {}", who, ex.what()));
  } catch (...) {
    log::error(fmt::format("{}: unknown exception", who));
  }
}

}  // namespace capsweep

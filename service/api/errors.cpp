#include "api/errors.hpp"

#include <nlohmann/json.hpp>

namespace capsweep::api {

namespace bhttp = boost::beast::http;

bhttp::status status_of(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument:
    case errc::parse_error:
      return bhttp::status::bad_request;
    case errc::unauthorized:
      return bhttp::status::unauthorized;
    case errc::forbidden:
      return bhttp::status::forbidden;
    case errc::not_found:
      return bhttp::status::not_found;
    case errc::method_not_allowed:
      return bhttp::status::method_not_allowed;
    case errc::conflict:
      return bhttp::status::conflict;
    case errc::payload_too_large:
      return bhttp::status::payload_too_large;
    case errc::too_many_requests:
      return bhttp::status::too_many_requests;
    case errc::unavailable:
      return bhttp::status::service_unavailable;
    case errc::internal:
      return bhttp::status::internal_server_error;
  }
  return bhttp::status::internal_server_error;
}

ApiError api_error(errc code, std::string message, std::string field, std::string code_name) {
  return {status_of(code), code_name.empty() ? std::string(to_string(code)) : std::move(code_name), std::move(message),
          std::move(field)};
}

ApiError from_error(const Error& e) {
  return api_error(e.code, e.message, e.field);
}

std::string error_body(const ApiError& e) {
  // Messages may quote what a client or a target sent: replace invalid UTF-8, never throw.
  return nlohmann::json{{"error", {{"code", e.code}, {"message", e.message}, {"field", e.field}}}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace capsweep::api

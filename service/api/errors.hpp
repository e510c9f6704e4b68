#pragma once
// The API's one mapping from domain errors to HTTP: every failure answer is built here, as
// {"error": {"code", "message", "field"}} with the status its errc maps to.

#include <boost/beast/http/status.hpp>
#include <string>

#include "core/error.hpp"

namespace capsweep::api {

// An API failure: the status and the error body's fields.
struct ApiError {
  boost::beast::http::status status = boost::beast::http::status::bad_request;
  std::string code;
  std::string message;
  std::string field;
};

// The status each kind of error answers with.
boost::beast::http::status status_of(errc code) noexcept;
// An error of kind `code`; `code_name` overrides the code string (e.g. "queue_full").
ApiError api_error(errc code, std::string message, std::string field = {}, std::string code_name = {});
ApiError from_error(const Error& e);
// The JSON body of an error answer.
std::string error_body(const ApiError& e);

}  // namespace capsweep::api

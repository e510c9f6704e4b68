#pragma once
// Domain errors of capsweep: expected outcomes (bad parameters, malformed input) are
// returned as capsweep::Result<T>, never thrown. Each error names the offending field
// as a JSON pointer so the API can answer {"error": {"code", "message", "field"}}.

#include <boost/system/result.hpp>
#include <exception>
#include <string>
#include <string_view>

namespace capsweep {

// Kinds of domain error; the API maps each to one HTTP status.
enum class errc {
  invalid_argument,  // a value out of range or of the wrong kind
  parse_error,       // text that could not be parsed (CSV, JSON, numbers)
  not_found,
  conflict,
  forbidden,
  unavailable,
  unauthorized,        // no valid credentials
  method_not_allowed,  // the path exists, the method does not
  too_many_requests,   // a queue or rate limit is full
  payload_too_large,   // a body or upload over its limit
  internal,            // a fault of ours; its message discloses nothing
};

// Stable lower-case name of an errc ("invalid_argument", ...), as the API prints it.
std::string_view to_string(errc code) noexcept;

struct Error {
  errc code = errc::invalid_argument;
  std::string message;  // human-readable, names the problem and the offending value
  std::string field;    // JSON pointer of the offending field ("" when none)
};

// Builds an invalid_argument error for `field`.
Error invalid(std::string field, std::string message);

// Thrown by Result<T>::value() on an error; carries the Error.
class ErrorException : public std::exception {
 public:
  explicit ErrorException(Error e);
  const char* what() const noexcept override { return what_.c_str(); }
  const Error& error() const noexcept { return error_; }

 private:
  Error error_;
  std::string what_;
};

// Found by ADL from boost::system::result<T, Error>::value().
[[noreturn]] void throw_exception_from_error(const Error& e, const boost::source_location& loc);

template <class T>
using Result = boost::system::result<T, Error>;

// The completion of a detached coroutine (co_spawn): prints "who: what" to stderr when it
// ended with an exception, so nothing escapes unseen.
void log_escaped(const char* who, std::exception_ptr e);

}  // namespace capsweep

#pragma once
// Checks a request passes before any handler sees it, as plain functions over header values
// and body text (no Beast), so each is unit-tested on its own:
//  - Host: loopback literals, "localhost" and configured names only (DNS rebinding);
//  - Origin: absent, or one whose host passes the Host rule (cross-site browser requests);
//  - Content-Type: a request with a body must say application/json (no "simple" CSRF form);
//  - nesting depth of a JSON body, measured before parsing, so a hostile document cannot
//    recurse the parser, the validator or a later copy into a stack overflow.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/allow_list.hpp"
#include "core/error.hpp"

namespace capsweep::api {

// The host part of a Host header or URL authority: "[::1]:8080" -> "::1", "a.b:80" -> "a.b".
std::string host_of(std::string_view authority);

// A Host header this service answers: a loopback address (127.0.0.0/8, ::1, v4-mapped
// loopback), "localhost", the address it listens on, or one `names` allows (a name,
// case-insensitive, an address or a CIDR block). Errors are errc::forbidden with field "Host".
std::optional<Error> check_host(std::string_view host_header, const AllowList& names, std::string_view listen_host);

// An Origin header (absent = empty) that may call the API: empty, or "scheme://host[:port]"
// whose host passes check_host. Errors are errc::forbidden with field "Origin".
std::optional<Error> check_origin(std::string_view origin, const AllowList& names, std::string_view listen_host);

// A body (non-empty) must be sent as application/json (parameters allowed), or, when
// `json_lines` (file uploads), also application/x-ndjson, application/jsonl or
// application/x-jsonlines. Errors are errc::invalid_argument with field "Content-Type".
std::optional<Error> check_json_content_type(std::string_view content_type, std::size_t body_size,
                                             bool json_lines = false);

// The JSON pointer of the first container nested deeper than `max_depth` in `text`, or
// nullopt when none is. Reads bytes only (strings and escapes are skipped); it does not
// validate the JSON, the parser does that afterwards.
std::optional<std::string> json_too_deep(std::string_view text, int max_depth);

}  // namespace capsweep::api

#pragma once
// The systemd notification protocol (Type=notify units), without libsystemd: one datagram to
// the socket named by $NOTIFY_SOCKET. "READY=1" once the API listens and the database is
// open, "STOPPING=1" when a signal starts the shutdown.

namespace capsweep::api {

// Sends `state` ("READY=1", "STOPPING=1", "STATUS=..."); false when $NOTIFY_SOCKET is unset
// (not started by systemd) or the datagram could not be sent. Never throws.
bool notify_systemd(const char* state) noexcept;

}  // namespace capsweep::api

// The two systemd protocols kprofd speaks, written here rather than taken from libsystemd: the
// service manager's notifications (sd_notify(3): READY, STATUS, STOPPING, the watchdog) and the
// journal's native protocol (systemd's "Native Journal Protocol"). Both are documented as
// stable interfaces for programs to speak themselves, and kprofd uses four calls of the
// library, which with the libraries it loads (libgcrypt, libgpg-error, liblzma, libzstd,
// liblz4, libcap) cost the idle daemon 1 MiB of its 20 MB resident, and the board bundle as much.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"

namespace kprof::server {

// Where journald takes native-protocol entries.
inline constexpr char kJournalSocket[] = "/run/systemd/journal/socket";

// sd_notify's protocol: `state` ("READY=1\nSTATUS=serving on ...") in one datagram to the
// AF_UNIX socket $NOTIFY_SOCKET names (a path, or "@name" in the abstract namespace). False
// when there is no such variable or the datagram cannot be sent.
bool NotifyServiceManager(std::string_view state);

// sd_watchdog_enabled's answer: the interval $WATCHDOG_USEC gives (a positive count of
// microseconds) when $WATCHDOG_PID is unset or names this process; nullopt otherwise.
std::optional<absl::Duration> WatchdogInterval();

// One entry of the journal's native protocol: `fields` ("KEY=value", KEY in capitals, digits
// and underscores) in one datagram to `socket_path`, a value holding a newline in the
// protocol's binary form (KEY, newline, its length as 64-bit little-endian, the bytes). An
// entry too large for a datagram goes in a sealed memfd passed with SCM_RIGHTS, as the
// protocol provides. False when the journal does not take it.
bool SendToJournal(const std::vector<std::string>& fields,
                   const std::string& socket_path = kJournalSocket);

}  // namespace kprof::server

// kprofd's logs as the service manager reads them: under systemd, each message goes to the
// journal with structured fields (sd_journal_sendv) — MESSAGE, PRIORITY, SYSLOG_IDENTIFIER and
// the message's own (JOB_ID, DEVICE, CLIENT, CODE, LEASE_ID) — so that `journalctl -u kprofd
// CLIENT=alice` finds one client's failures; elsewhere plain lines on stderr.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "base/log.h"

namespace kprof::server {

enum class LogFormat { kPlain, kJournal };

// --log-format: "journal", "plain", or "auto" (the journal when stderr is the journal's, as
// systemd says through $JOURNAL_STREAM). INVALID_ARGUMENT for anything else;
// FAILED_PRECONDITION for "journal" where there is no journal's socket to send to.
absl::StatusOr<LogFormat> ChooseLogFormat(const std::string& flag);

// A sink that sends each message to the journal; a message the journal refuses is written to
// stderr as a plain line instead.
base::LogSink JournalSink();

}  // namespace kprof::server

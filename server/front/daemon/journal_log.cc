#include "server/front/daemon/journal_log.h"

#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/front/daemon/service_manager.h"

namespace kprof::server {
namespace {

const char* SeverityName(base::LogSeverity severity) {
  switch (severity) {
    case base::LogSeverity::kInfo:
      return "info";
    case base::LogSeverity::kWarning:
      return "warning";
    case base::LogSeverity::kError:
      return "error";
  }
  return "log";
}

// Whether stderr is the stream $JOURNAL_STREAM ("DEVICE:INODE") names, as systemd documents for
// services that want to speak the journal's native protocol instead.
bool StderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  uintmax_t device = 0, inode = 0;
  if (std::sscanf(stream, "%" SCNuMAX ":%" SCNuMAX, &device, &inode) != 2) return false;
  struct stat st {};
  return fstat(STDERR_FILENO, &st) == 0 && st.st_dev == device && st.st_ino == inode;
}

int Priority(base::LogSeverity severity) {
  switch (severity) {
    case base::LogSeverity::kInfo:
      return LOG_INFO;
    case base::LogSeverity::kWarning:
      return LOG_WARNING;
    case base::LogSeverity::kError:
      return LOG_ERR;
  }
  return LOG_NOTICE;
}

}  // namespace

absl::StatusOr<LogFormat> ChooseLogFormat(const std::string& flag) {
  // A message the journal does not take goes to stderr instead, which under systemd is the
  // journal too: no journal socket at all, no journal format.
  const bool journal_there = access(kJournalSocket, W_OK) == 0;
  if (flag == "journal") {
    if (!journal_there) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--log-format journal: there is no journal here (", kJournalSocket,
          " is missing or not writable; is systemd-journald running?); --log-format plain writes "
          "lines to stderr"));
    }
    return LogFormat::kJournal;
  }
  if (flag == "plain") return LogFormat::kPlain;
  if (flag == "auto" || flag.empty()) {
    return StderrIsJournal() && journal_there ? LogFormat::kJournal : LogFormat::kPlain;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--log-format '", flag, "': auto (the journal under systemd), journal or plain"));
}

base::LogSink JournalSink() {
  return [](base::LogSeverity severity, std::string_view message, const base::LogFields& fields) {
    std::vector<std::string> items = {std::string("MESSAGE=").append(message),
                                      absl::StrCat("PRIORITY=", Priority(severity)),
                                      "SYSLOG_IDENTIFIER=kprofd"};
    for (const base::LogField& field : fields) {
      items.push_back(absl::StrCat(field.name, "=", field.value));
    }
    if (SendToJournal(items)) return;
    std::string tail;
    for (const base::LogField& field : fields)
      absl::StrAppend(&tail, " ", field.name, "=", field.value);
    std::fprintf(stderr, "%s %s %.*s%s\n",
                 absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()).c_str(),
                 SeverityName(severity), static_cast<int>(message.size()), message.data(),
                 tail.c_str());
  };
}

}  // namespace kprof::server

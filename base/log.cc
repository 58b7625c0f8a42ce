#include "base/log.h"

#include <cstdio>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace kprof::base {
namespace {

absl::Mutex g_mutex;
LogSink* g_sink ABSL_GUARDED_BY(g_mutex) = nullptr;

const char* SeverityName(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return "info";
    case LogSeverity::kWarning:
      return "warning";
    case LogSeverity::kError:
      return "error";
  }
  return "log";
}

}  // namespace

void Log(LogSeverity severity, std::string_view message, const LogFields& fields) {
  absl::MutexLock lock(&g_mutex);
  if (g_sink != nullptr) {
    (*g_sink)(severity, message, fields);
    return;
  }
  // Time and level first, one line per message: what journald and grep want.
  const std::string now =
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  std::string tail;
  for (const LogField& field : fields) absl::StrAppend(&tail, " ", field.name, "=", field.value);
  std::fprintf(stderr, "%s %s %.*s%s\n", now.c_str(), SeverityName(severity),
               static_cast<int>(message.size()), message.data(), tail.c_str());
}

LogSink SetLogSink(LogSink sink) {
  absl::MutexLock lock(&g_mutex);
  LogSink previous = g_sink != nullptr ? std::move(*g_sink) : nullptr;
  delete g_sink;
  g_sink = sink ? new LogSink(std::move(sink)) : nullptr;
  return previous;
}

}  // namespace kprof::base

#include "core/log.h"

#include <cstdio>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace kprof::core {
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

void Log(LogSeverity severity, std::string_view message) {
  absl::MutexLock lock(&g_mutex);
  if (g_sink != nullptr) {
    (*g_sink)(severity, message);
    return;
  }
  std::fprintf(stderr, "kprof %s: %.*s\n", SeverityName(severity),
               static_cast<int>(message.size()), message.data());
}

LogSink SetLogSink(LogSink sink) {
  absl::MutexLock lock(&g_mutex);
  LogSink previous = g_sink != nullptr ? std::move(*g_sink) : nullptr;
  delete g_sink;
  g_sink = sink ? new LogSink(std::move(sink)) : nullptr;
  return previous;
}

}  // namespace kprof::core

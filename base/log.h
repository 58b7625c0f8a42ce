// Minimal logging for core: one line per message on stderr, or to a sink a test or the daemon
// installs. (Debian 12's Abseil has no absl/log.)
#pragma once

#include <functional>
#include <string_view>

namespace kprof::base {

enum class LogSeverity { kInfo, kWarning, kError };

// Writes `message` as one line, prefixed with the UTC time and the severity
// ("2026-11-30T21:50:01.123Z warning ...").
void Log(LogSeverity severity, std::string_view message);

using LogSink = std::function<void(LogSeverity, std::string_view)>;

// Sends every later message to `sink` (nullptr: back to stderr); returns the previous sink.
LogSink SetLogSink(LogSink sink);

}  // namespace kprof::base

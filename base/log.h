// Minimal logging for core: one line per message on stderr, or to a sink a test or the daemon
// installs (kprofd's journal sink, under systemd). (Debian 12's Abseil has no absl/log.)
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kprof::base {

enum class LogSeverity { kInfo, kWarning, kError };

// A structured field of a message, in the journal's terms: an upper-case NAME ("JOB_ID",
// "DEVICE", "CLIENT", "CODE") and its value.
struct LogField {
  std::string name;
  std::string value;
};
using LogFields = std::vector<LogField>;

// Writes `message` as one line, prefixed with the UTC time and the severity
// ("2026-11-30T21:50:01.123Z warning ..."), the fields after it as NAME=value.
void Log(LogSeverity severity, std::string_view message, const LogFields& fields = {});

using LogSink = std::function<void(LogSeverity, std::string_view, const LogFields&)>;

// Sends every later message to `sink` (nullptr: back to stderr); returns the previous sink.
LogSink SetLogSink(LogSink sink);

}  // namespace kprof::base

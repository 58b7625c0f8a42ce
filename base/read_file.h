// Reading files whole: modules, certificates, token and sequence files (ReadFile), and the small
// files of /proc and /sys that describe the host (ReadSmallFile, ReadFirstLine). The project's
// one reader of files: nothing else opens a file to read it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kprof::base {

// The file's bytes. NOT_FOUND naming `what` ("the TLS key"), the path and the reason when it
// cannot be opened; INVALID_ARGUMENT when `path` is a directory.
absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what = "file");

// The whole text of a small file the kernel makes (/proc/cpuinfo, a sysfs attribute), read to
// its end; nullopt when it cannot be opened or read.
std::optional<std::string> ReadSmallFile(const std::string& path);

// The first line of such a file, without surrounding whitespace; nullopt when the file cannot
// be read. An empty file is "".
std::optional<std::string> ReadFirstLine(const std::string& path);

// A sysfs attribute holding one number on its first line, 0 or more (a clock in Hz, a counter of
// microjoules); nullopt when the file cannot be read or holds something else.
std::optional<uint64_t> ReadCountFile(const std::string& path);
// The same for a decimal number (finite, 0 or more).
std::optional<double> ReadDecimalFile(const std::string& path);

// The paths of the entries of `dir` whose names start with `prefix`, sorted; none when the
// directory cannot be read. For walking /sys.
std::vector<std::filesystem::path> DirectoryEntries(const std::filesystem::path& dir,
                                                    std::string_view prefix = "");

// The whole of `fd` from offset 0 (pread: the descriptor's offset is left alone).
// INVALID_ARGUMENT "cannot read the module: ..." when a read fails.
absl::StatusOr<std::string> ReadDescriptor(int fd);

// The text (up to 4 KiB) of a small file the kernel makes afresh on every read, such as
// /proc/loadavg, through a descriptor opened at the first call and kept: a pread each time where
// an open would walk the path and a close follow. Reopened if the descriptor stops working;
// "" when the file cannot be read. Thread-safe.
std::string ReadKeptOpen(const std::string& path);

}  // namespace kprof::base

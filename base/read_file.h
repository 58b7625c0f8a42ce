// Reads a whole file into a string: modules, certificates, token and sequence files.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kprof::core {

// The file's bytes. NOT_FOUND naming `what` ("the TLS key"), the path and the reason when it
// cannot be opened.
absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what = "file");

// The whole of `fd` from offset 0 (pread: the descriptor's offset is left alone).
// INVALID_ARGUMENT "cannot read the module: ..." when a read fails.
absl::StatusOr<std::string> ReadDescriptor(int fd);

// The text (up to 4 KiB) of a small file the kernel makes afresh on every read, such as
// /proc/loadavg, through a descriptor opened at the first call and kept: a pread each time where
// an open would walk the path and a close follow. Reopened if the descriptor stops working;
// "" when the file cannot be read. Thread-safe.
std::string ReadKeptOpen(const std::string& path);

}  // namespace kprof::core

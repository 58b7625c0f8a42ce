// Reads a whole file into a string: modules, certificates, token and sequence files.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace kprof::core {

// The file's bytes. NOT_FOUND naming `what` ("the TLS key"), the path and the reason when it
// cannot be opened.
absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what = "file");

}  // namespace kprof::core

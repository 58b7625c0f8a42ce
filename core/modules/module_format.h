// What an uploaded module is, from its bytes and the format its uploader declared: a shared
// library for the host (its exported functions), or CUDA code — a cubin or PTX (its kernels),
// or a fatbin (kernels known once a device loads it). The daemon decides this at upload and
// again when it re-reads its cache, without loading anything.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kprof::core {

inline constexpr std::string_view kSharedLibraryFormat = "shared-library";

struct ModuleDescription {
  std::string format;                  // "shared-library", "cubin", "fatbin" or "ptx"
  std::vector<std::string> functions;  // sorted; empty for a fatbin
};

// `declared`: "" or "auto" (decide from the bytes), or one of the formats, which the bytes must
// then be. INVALID_ARGUMENT for an unknown format, a mismatch ("declared cubin, but the bytes
// are PTX"), what the inspection of the format finds wrong, and a function name that is not
// printable UTF-8.
absl::StatusOr<ModuleDescription> DescribeModule(std::string_view bytes, std::string_view declared);

// Whether `text` is UTF-8 without control characters (below U+0020, U+007F..U+009F): what
// a name must be to travel in the protocol's strings and to be printed as it is.
bool IsPrintableUtf8(std::string_view text);

// "'na\x1bme'": `text` quoted, with bytes beyond printable ASCII as \xHH, for messages.
std::string QuoteBytes(std::string_view text);

// Whether `format` is one DescribeModule takes (so an upload's header can be refused early).
bool IsModuleFormat(std::string_view format);

// Whether modules of `format` run on CUDA devices (and not on the CPU).
bool IsCudaFormat(std::string_view format);

}  // namespace kprof::core

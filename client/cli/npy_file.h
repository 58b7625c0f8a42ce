// NumPy .npy files (format versions 1.0 to 3.0): the expected data of a checked measurement
// (`kprof time --expect FILE.npy`). Little-endian C-order arrays of bool, integer and float
// types; a Fortran-order or big-endian array is refused, naming what is accepted.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::client {

// Parses the bytes of a .npy file into the dtype ("float32", as argument specs name types),
// shape and data of an ExpectedOutput. INVALID_ARGUMENT names `name` and what is wrong.
absl::StatusOr<kprof::v1::ExpectedOutput> ParseNpy(std::string_view bytes, std::string_view name);

// Reads and parses a .npy file.
absl::StatusOr<kprof::v1::ExpectedOutput> ReadNpyFile(const std::string& path);

}  // namespace kprof::client

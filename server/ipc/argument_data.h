// The receiving end of a checked call's arguments (worker/argument_file.h writes them): a
// sealed memfd whose bytes are every argument's, in order.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {

// Reads the file `fd` (not closed) that came with `answer` into answer->argument_bytes. The file
// must be sealed against writing and resizing, and hold exactly the sizes `answer->arguments()`
// gives (the arguments not `unsent`, then those `initial` names): DATA_LOSS otherwise.
absl::Status ReadArgumentFile(int fd, kprof::worker::v1::WorkerAnswer* answer);

}  // namespace kprof::server

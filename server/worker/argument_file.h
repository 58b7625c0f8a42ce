// The arguments of a checked call, sent out of the worker: their bytes, in order, in a sealed
// memfd that travels with the answer's frame. The front compares them with the reference's
// outside this process, so nothing the function does here can see or change the comparison.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/args/arguments.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {

// Writes every argument's bytes as they are now into a new sealed memfd (close-on-exec, the
// caller's), and their sizes into `data`; with `before` (each argument's bytes before the call),
// whether the call changed each. RESOURCE_EXHAUSTED when the file cannot be made.
absl::StatusOr<int> WriteArgumentFile(const core::Arguments& args,
                                      kprof::worker::v1::ArgumentData* data,
                                      const std::vector<std::string>* before = nullptr);

// Each argument's bytes as they are now, copied to host memory.
absl::StatusOr<std::vector<std::string>> CopyArguments(const core::Arguments& args);

}  // namespace kprof::server

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

// The file a job's checked calls write their arguments into, one call after another, sealed
// before it goes out with the answer.
class ArgumentFile {
 public:
  ArgumentFile() = default;
  ArgumentFile(const ArgumentFile&) = delete;
  ArgumentFile& operator=(const ArgumentFile&) = delete;
  ~ArgumentFile();

  // Appends every argument's bytes as they are now (a new memfd, close-on-exec, at the first),
  // and their sizes to `data`; with `before` (each argument's bytes before the call), whether
  // the call changed each. RESOURCE_EXHAUSTED when the file cannot be made or written.
  absl::Status Append(const core::Arguments& args, kprof::worker::v1::ArgumentData* data,
                      const std::vector<std::string>* before = nullptr);
  // Seals what was appended against any change and hands the file over (the caller's to
  // close); -1 when nothing was appended. Afterwards the object is empty again.
  absl::StatusOr<int> Seal();
  // Drops what was appended (a job that failed).
  void Discard();

 private:
  int fd_ = -1;
};

// Each argument's bytes as they are now, copied to host memory.
absl::StatusOr<std::vector<std::string>> CopyArguments(const core::Arguments& args);

}  // namespace kprof::server

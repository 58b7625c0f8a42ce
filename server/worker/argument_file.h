// The arguments of a checked call, sent out of the worker: their bytes, in order, in a sealed
// memfd that travels with the answer's frame. The front compares them with the reference's
// outside this process, so nothing the function does here can see or change the comparison.
#pragma once

#include <string>
#include <utility>
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

  // Keeps the host arguments' bytes as they are before a checked call (in buffers reused from
  // call to call; not past kRememberedBytes in all), for the next Append to leave out those the
  // call did not change.
  absl::Status Remember(const core::Arguments& args);
  // For the next Append: the arguments known to be as they were before the call (a strict
  // check fingerprinted them), left out of the file as Remember's would be.
  void LeaveOut(std::vector<bool> unchanged) { left_out_ = std::move(unchanged); }
  // Appends every argument's bytes as they are now (a new memfd, close-on-exec, at the first),
  // and their sizes to `data`, leaving out (`unsent`) those Remember kept that came back as
  // they were. With `before` (a reference's run: each argument's bytes before the call):
  // whether the call changed each, and the initial bytes of those it changed after all the
  // arguments (`initial`). RESOURCE_EXHAUSTED when the file cannot be made or written.
  absl::Status Append(const core::Arguments& args, kprof::worker::v1::ArgumentData* data,
                      const std::vector<std::string>* before = nullptr);
  // Seals what was appended against any change and hands the file over (the caller's to
  // close); -1 when nothing was appended. Afterwards the object is empty again.
  absl::StatusOr<int> Seal();
  // Drops what was appended (a job that failed).
  void Discard();

  // The most a checked call's host arguments may hold for Remember to keep them: beyond it,
  // every argument is sent (a copy would double the worker's memory).
  static constexpr uint64_t kRememberedBytes = uint64_t{64} << 20;

 private:
  absl::Status Write(const char* from, uint64_t bytes);

  int fd_ = -1;
  // Remember's: each argument's bytes before the call, and whether they were kept.
  std::vector<std::string> before_;
  std::vector<bool> remembered_;
  std::vector<bool> left_out_;  // LeaveOut's
};

// Each argument's bytes as they are now, copied to host memory.
absl::StatusOr<std::vector<std::string>> CopyArguments(const core::Arguments& args);

}  // namespace kprof::server

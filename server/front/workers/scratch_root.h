// ScratchRoot: the directory under which each worker gets a scratch directory of its own (its
// TMPDIR, the one place it may write), and RemoveTree, which empties them.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/worker/worker_sandbox.h"

namespace kprof::server {

// The directory in which each worker gets its scratch directory: BASE/kprofd.PID.XXXXXX, made
// at start (mode 0700) and removed with everything in it when the daemon ends. Those a daemon
// killed before it could remove its own left behind (of this user, their pid gone) are
// removed by the next daemon to use BASE.
class ScratchRoot {
 public:
  // BASE: --scratch-dir, else /dev/shm (memory, as a TMPDIR usually is), else $TMPDIR or /tmp.
  // With a worker `user`, BASE must be reachable by it (every directory above searchable), and
  // the root is made searchable (not listable) by others.
  static absl::StatusOr<std::unique_ptr<ScratchRoot>> Make(
      std::string base, const std::optional<WorkerUser>& user = std::nullopt);
  ~ScratchRoot();
  ScratchRoot(const ScratchRoot&) = delete;
  ScratchRoot& operator=(const ScratchRoot&) = delete;
  const std::string& path() const { return path_; }

 private:
  ScratchRoot(std::string path, int lock) : path_(std::move(path)), lock_(lock) {}
  std::string path_;
  int lock_;  // an exclusive flock on the root, held while the daemon runs
};

// Removes `path` and everything beneath it, not following symbolic links; false if something
// is left.
bool RemoveTree(const std::string& path);

}  // namespace kprof::server

// WorkerCgroups: a memory cgroup for each worker, so that what it maps — MAP_SHARED memory and
// files in its tmpfs scratch included, which RLIMIT_DATA does not count — is bounded in bytes,
// and the kernel's OOM killer ends that worker alone. cgroup v2 where the daemon's cgroup has the
// memory controller and may be written (a unit with Delegate=yes, or root), else the v1 memory
// hierarchy; neither: the daemon says why and runs with RLIMIT_DATA alone.
//
// v2 forbids processes in a cgroup whose children have controllers, so the front moves itself
// into a leaf of its own cgroup, `front`, beside `workers/w-N`. v1 has no such rule: the tree
// is `kprofd-PID/w-N` beneath the daemon's memory cgroup.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace kprof::server {

class WorkerCgroups {
 public:
  // Sets up the tree, or says why there can be none. `limit_bytes` per worker.
  static absl::StatusOr<std::unique_ptr<WorkerCgroups>> Make(uint64_t limit_bytes);
  ~WorkerCgroups();  // removes the tree (its workers are gone by then)
  WorkerCgroups(const WorkerCgroups&) = delete;
  WorkerCgroups& operator=(const WorkerCgroups&) = delete;

  // One worker's cgroup.
  class Box {
   public:
    ~Box();  // removes the cgroup; its processes must be gone
    Box(const Box&) = delete;
    Box& operator=(const Box&) = delete;
    // Moves `pid` in (before the worker runs any job).
    absl::Status Add(pid_t pid);
    // Kills every process in it.
    void KillAll();
    // Whether the kernel's OOM killer ended a process of it.
    bool OomKilled() const;
    const std::string& path() const { return path_; }

   private:
    friend class WorkerCgroups;
    Box(std::string path, int version) : path_(std::move(path)), version_(version) {}
    std::string path_;
    int version_;
  };
  absl::StatusOr<std::unique_ptr<Box>> NewBox();

  uint64_t limit_bytes() const { return limit_bytes_; }
  int version() const { return version_; }
  // "memory cgroup v2 of 12884901888 bytes per worker", for GetInfo and the log.
  std::string Describe() const;

 private:
  WorkerCgroups(std::string root, int version, uint64_t limit_bytes)
      : root_(std::move(root)), version_(version), limit_bytes_(limit_bytes) {}
  std::string root_;  // v2: the daemon's cgroup; v1: kprofd-PID beneath it
  int version_;
  uint64_t limit_bytes_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace kprof::server

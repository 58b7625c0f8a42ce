// The worker's sandbox: Landlock rules, applied before the first job, so that the client code a
// worker runs can read the system (libraries, /proc, its modules) but not the daemon's secrets,
// and write only scratch space (/tmp, /dev, /dev/shm) — never the module cache.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace kprof::server {

struct SandboxPaths {
  std::vector<std::string> unreadable;  // e.g. the token file
  std::vector<std::string> unwritable;  // e.g. the module cache, even when it lies under /tmp
};

// Restricts this process and its future children for good. UNIMPLEMENTED where the kernel has
// no Landlock (the caller logs it and goes on: the unit's sandbox still applies).
absl::Status ApplyWorkerSandbox(const SandboxPaths& paths);

}  // namespace kprof::server

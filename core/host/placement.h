// Placement of the measuring process: the CPUs it may run on and its scheduling priority.
//
// Pinning a worker to CPUs the rest of the system leaves alone, and raising its priority, are
// the two cheapest ways to take noise out of a measurement. kprofd takes both as options
// (--pin-cpus 2-3, --worker-priority nice:-5 or fifo:10), checks at start that it may apply
// them, and each worker applies them to itself before its first job. The environment manifest
// reports what the worker ended up with.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kprof::core {

// "0-3,6" <-> {0, 1, 2, 3, 6}. INVALID_ARGUMENT naming the bad part; CPUs 0 to 1023, sorted,
// each once.
absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text);
std::string FormatCpuList(const std::vector<int>& cpus);

// The CPUs the calling thread may run on.
std::vector<int> AllowedCpus();

struct Priority {
  enum class Policy { kInherit, kNice, kFifo };
  Policy policy = Policy::kInherit;
  int value = 0;  // nice -20..19, or SCHED_FIFO priority 1..99
};

// "nice:N" or "fifo:N" ("" inherits); INVALID_ARGUMENT saying what is accepted.
absl::StatusOr<Priority> ParsePriority(std::string_view text);
std::string FormatPriority(const Priority& priority);  // as ParsePriority reads it

struct Placement {
  std::vector<int> cpus;  // empty: inherit
  Priority priority;
};

// Applies `placement` to the calling thread (the whole process when it has one thread, as a
// worker has at start). FAILED_PRECONDITION naming the system call, its error, and what grants
// the permission when that is the problem.
absl::Status ApplyPlacement(const Placement& placement);

// Whether ApplyPlacement would succeed, tried on a short-lived thread so the caller stays as it
// is: kprofd checks its options at start this way rather than failing every job later.
absl::Status CheckPlacement(const Placement& placement);

// Moves the calling thread out of the measurements' way, and with it the threads it starts
// from here on: onto the CPUs it may use but `measuring` (--pin-cpus) where any are left, and
// with `lowest`, to nice 19 (for a thread that holds nothing the daemon's others wait for: one
// at nice 19 holding a lock would keep them waiting while it waits for a CPU).
void StandAside(const std::vector<int>& measuring, bool lowest);

}  // namespace kprof::core

// The worker's sandbox: Landlock rules, applied before the first job, so that the client code a
// worker runs can read the system (libraries, /proc, its modules) but not the daemon's secrets,
// and write only its own scratch directory and a few device nodes — never the module cache, nor
// the /tmp and /dev/shm it shares with the host.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kprof::server {

struct SandboxPaths {
  std::vector<std::string> unreadable;  // e.g. the token file
  std::string scratch;                  // the worker's own TMPDIR: the one writable directory
};

// Restricts this process and its future children for good, and says how ("Landlock ABI 7:
// files, TCP, signals, abstract sockets"). UNIMPLEMENTED where the kernel has no Landlock (the
// caller logs it and goes on: the unit's sandbox still applies).
absl::StatusOr<std::string> ApplyWorkerSandbox(const SandboxPaths& paths);

}  // namespace kprof::server

namespace kprof::server {

// A seccomp filter for the rest of this process's life, installed once the worker is set up:
// the calls a measured function has no business making fail with EPERM (clone3 with ENOSYS, so
// that the C library falls back to clone, which is filtered by its flags). Denied: new
// processes (fork, vfork, clone without CLONE_THREAD) and exec; signals, ptrace, rlimits,
// priorities and perf events aimed at another process; what a later job would inherit (rlimit
// changes, alarms and timers, signal handlers, the working directory, the umask, CPU affinity,
// priority and scheduling class); new sessions and process groups; mounts, namespaces,
// keyrings, BPF, kernel modules, clocks, reboot and swap; file mode and owner changes; System V
// IPC and POSIX message queues; and every socket but netlink's. What a filter cannot see (the job
// socket replaced, threads left running) the worker checks at the end of each job.
absl::Status ApplyWorkerSyscallFilter();

// The user a root daemon's workers run as: never root, and no process of the daemon's.
struct WorkerUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary (video, for a Jetson's GPU nodes)
};

// "UID:GID" or "UID:GID:G1,G2": the worker's --user argument.
std::string FormatWorkerUser(const WorkerUser& user);
absl::StatusOr<WorkerUser> ParseWorkerUser(const std::string& text);

// Becomes `user` for good — real, effective and saved ids, groups — keeping CAP_PERFMON's
// permitted bit for DropCapabilities. `parent`: the daemon, whose death signal is asked for
// again (a change of credentials clears it); FAILED_PRECONDITION if it is already gone.
absl::Status BecomeUser(const WorkerUser& user, pid_t parent);

// Drops every capability but CAP_PERFMON from the bounding set (which needs CAP_SETPCAP: before
// BecomeUser) and clears the ambient set.
void DropBoundingSet();

// Gives up every capability but CAP_PERFMON (which lets the collectors count in kernel mode
// where the daemon runs as root): effective, permitted, inheritable, ambient and, where the
// process may, the bounding set. A root daemon's workers keep uid 0 but none of its powers.
absl::Status DropCapabilities();

}  // namespace kprof::server

// A busy host for a test: processes that spin, in a process group of their own, each ending by
// itself after a bound (an alarm) should the test die before it stops them.
//
//   CpuHogs hogs(2 * std::thread::hardware_concurrency(), /*seconds=*/30);
//   ... measure: every CPU is shared ...
//   // hogs.~CpuHogs() kills the group and reaps it
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

namespace kprof::testing {

class CpuHogs {
 public:
  CpuHogs(int count, unsigned seconds) {
    for (int i = 0; i < count; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        // Only what is async-signal-safe after a fork of a threaded process.
        setpgid(0, group_);
        alarm(seconds);
        for (volatile unsigned long spins = 0;; spins = spins + 1) {
        }
      }
      if (pid < 0) break;
      if (group_ == 0) group_ = pid;
      setpgid(pid, group_);  // as the child does, whichever runs first
      pids_.push_back(pid);
    }
  }
  ~CpuHogs() {
    if (group_ > 0) kill(-group_, SIGKILL);
    for (const pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  CpuHogs(const CpuHogs&) = delete;
  CpuHogs& operator=(const CpuHogs&) = delete;

  size_t size() const { return pids_.size(); }

 private:
  pid_t group_ = 0;
  std::vector<pid_t> pids_;
};

}  // namespace kprof::testing

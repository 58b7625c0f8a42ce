#include "core/measure/gpu_sharing.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/read_file.h"
#include "core/collectors/nvml_collector.h"

namespace kprof::core {

bool IsSiblingOrParent(int pid) {
  const pid_t parent = getppid();
  if (parent <= 1) return false;
  if (pid == parent) return true;
  // /proc/PID/stat: "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
  const std::optional<std::string> stat = base::ReadFirstLine(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return false;
  const size_t end = stat->rfind(')');
  if (end == std::string::npos || end + 4 >= stat->size()) return false;
  const std::string rest = stat->substr(end + 4);  // past ") S "
  int ppid = 0;
  return absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &ppid) && ppid == parent;
}

void GpuSharing::Sample() {
  if (device_.type != base::DeviceType::kCuda) return;
  const absl::StatusOr<std::vector<GpuProcess>> processes =
      GpuComputeProcesses(device_.id, library_);
  if (!processes.ok()) return;
  for (const GpuProcess& p : *processes) {
    if (p.pid == getpid() || IsSiblingOrParent(p.pid)) continue;
    others_.insert({p.pid, p.memory_mib});
  }
}

std::string GpuSharing::After() {
  Sample();
  if (others_.empty()) return "";
  std::vector<std::string> named;
  int last = -1;
  for (const auto& [pid, mib] : others_) {
    if (pid == last) continue;  // listed twice, its memory grown: once is enough
    last = pid;
    named.push_back(absl::StrCat("pid ", pid, " (", mib, " MiB)"));
  }
  return absl::StrCat(named.size() == 1 ? "another process" : "other processes", " computed on ",
                      base::DeviceSpec(device_),
                      " during the measurement: ", absl::StrJoin(named, ", "));
}

}  // namespace kprof::core

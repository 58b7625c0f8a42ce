// What the tests read of processes in /proc: children, and resident memory.
#pragma once

#include <dirent.h>
#include <sys/types.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kprof::testing {

// Resident memory says what a process holds, but not under a sanitizer, whose allocator keeps
// freed memory in quarantine: memory bounds checked by resident size are checked only without.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kResidentMeansHeld = false;
#else
inline constexpr bool kResidentMeansHeld = true;
#endif

// The live (not zombie) processes whose parent is `pid`.
inline std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return children;
  while (dirent* entry = readdir(proc)) {
    const pid_t candidate = static_cast<pid_t>(std::atoi(entry->d_name));
    if (candidate <= 0) continue;
    std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(line.substr(paren + 2));
    char state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent == pid && state != 'Z') children.push_back(candidate);
  }
  closedir(proc);
  return children;
}

// The process's command name (/proc/PID/comm), "" when it is gone.
inline std::string CommandOf(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name;
}

// VmRSS in kB, -1 when unreadable.
inline int64_t ResidentKb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

// VmHWM (the peak of VmRSS) in kB, -1 when unreadable.
inline int64_t PeakResidentKb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

}  // namespace kprof::testing

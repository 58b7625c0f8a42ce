// What a running process (the daemon under test) has loaded and started, read from /proc.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace kprof::testing {

// The files mapped into `pid` whose name contains `part` ("libcuda", "libpapi").
inline std::vector<std::string> MappedFiles(pid_t pid, const std::string& part) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::set<std::string> found;
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find(part) != std::string::npos) found.insert(path);
  }
  return {found.begin(), found.end()};
}

// The pids of `pid`'s children, from every process's parent in /proc/PID/stat (not every
// kernel has /proc/PID/task/TID/children).
inline std::vector<pid_t> ChildProcesses(pid_t pid) {
  std::vector<pid_t> children;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses, so from the last ')'.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    std::string state;
    pid_t parent = 0;
    if (fields >> state >> parent && parent == pid) children.push_back(std::stoi(name));
  }
  return children;
}

}  // namespace kprof::testing

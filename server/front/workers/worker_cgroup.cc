#include "server/front/workers/worker_cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/byte_size.h"
#include "base/read_file.h"

namespace kprof::server {
namespace {

std::string ReadText(const std::string& path) { return base::ReadSmallFile(path).value_or(""); }

absl::Status WriteText(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  const ssize_t n = write(fd, text.data(), text.size());
  const int error = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write '", text, "' to ", path, ": ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::vector<pid_t> Procs(const std::string& cgroup) {
  std::vector<pid_t> pids;
  for (absl::string_view line : absl::StrSplit(ReadText(cgroup + "/cgroup.procs"), '\n')) {
    int pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

// The value of `key` in a "key value" per line file (memory.events, memory.oom_control).
uint64_t Field(const std::string& path, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(ReadText(path), '\n')) {
    if (absl::ConsumePrefix(&line, key) && absl::ConsumePrefix(&line, " ")) {
      uint64_t value = 0;
      if (absl::SimpleAtoi(line, &value)) return value;
    }
  }
  return 0;
}

// Where the hierarchy holding this process's cgroup is mounted, and that cgroup's path within
// it: v2 (`memory_v1` false) or v1's memory controller. Empty when there is none.
std::string OwnCgroupDir(bool memory_v1) {
  std::string relative;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(ReadText("/proc/self/cgroup"), '\n')) {
    const std::vector<absl::string_view> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    const bool is_v2 = f[0] == "0" && f[1].empty();
    const bool is_memory =
        absl::c_linear_search(std::vector<absl::string_view>(absl::StrSplit(f[1], ',')), "memory");
    if (memory_v1 ? is_memory : is_v2) {
      relative = std::string(f[2]);
      found = true;
    }
  }
  if (!found) return "";
  for (absl::string_view line : absl::StrSplit(ReadText("/proc/self/mountinfo"), '\n')) {
    // id parent major:minor root mount-point options [optional...] - type source super-options
    const std::vector<absl::string_view> halves = absl::StrSplit(line, " - ");
    if (halves.size() != 2) continue;
    const std::vector<absl::string_view> left = absl::StrSplit(halves[0], ' ');
    const std::vector<absl::string_view> right = absl::StrSplit(halves[1], ' ');
    if (left.size() < 5 || right.size() < 3) continue;
    const bool matches =
        memory_v1 ? right[0] == "cgroup" &&
                        absl::c_linear_search(
                            std::vector<absl::string_view>(absl::StrSplit(right[2], ',')), "memory")
                  : right[0] == "cgroup2";
    if (!matches) continue;
    absl::string_view root = left[3];
    absl::string_view within = relative;
    if (root != "/" && !absl::ConsumePrefix(&within, root)) continue;
    std::string dir = std::string(left[4]);
    if (within != "/") absl::StrAppend(&dir, within);
    return dir;
  }
  return "";
}

// Removes cgroup `dir` and the cgroups beneath it (empty of processes).
void RemoveCgroup(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_type == DT_DIR && e->d_name[0] != '.') RemoveCgroup(dir + "/" + e->d_name);
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

// Cgroups named PREFIX<pid>... under `dir` of daemons that are gone.
void RemoveStale(const std::string& dir, const char* prefix) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    absl::string_view name = e->d_name;
    if (!absl::ConsumePrefix(&name, prefix)) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(name.substr(0, name.find('-')), &pid) || pid <= 0) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) RemoveCgroup(dir + "/" + e->d_name);
  }
  closedir(d);
}

absl::StatusOr<std::string> SetUpV2() {
  const std::string own = OwnCgroupDir(/*memory_v1=*/false);
  if (own.empty()) return absl::FailedPreconditionError("no cgroup v2 hierarchy");
  const std::vector<std::string> controllers =
      absl::StrSplit(ReadText(own + "/cgroup.controllers"), absl::ByAnyChar(" \n"));
  if (!absl::c_linear_search(controllers, "memory")) {
    return absl::FailedPreconditionError(
        absl::StrCat("cgroup v2: no memory controller in ", own, " (Delegate=yes gives one)"));
  }
  // The front into a leaf of its own, then the memory controller for the children.
  const std::string front = own + "/front";
  if (absl::Status s = MakeDir(front); !s.ok()) return s;
  if (absl::Status s = WriteText(front + "/cgroup.procs", std::to_string(getpid())); !s.ok()) {
    return s;
  }
  if (absl::Status s = WriteText(own + "/cgroup.subtree_control", "+memory"); !s.ok()) {
    // Other processes in the cgroup, say: the front goes back where it was.
    (void)WriteText(own + "/cgroup.procs", std::to_string(getpid()));
    rmdir(front.c_str());
    return s;
  }
  const std::string workers = own + "/workers";
  if (absl::Status s = MakeDir(workers); !s.ok()) return s;
  if (absl::Status s = WriteText(workers + "/cgroup.subtree_control", "+memory"); !s.ok()) {
    return s;
  }
  RemoveStale(workers, "w-");
  return workers;
}

absl::StatusOr<std::string> SetUpV1() {
  const std::string own = OwnCgroupDir(/*memory_v1=*/true);
  if (own.empty()) return absl::FailedPreconditionError("no cgroup v1 memory hierarchy");
  RemoveStale(own, "kprofd-");
  const std::string root = absl::StrCat(own, "/kprofd-", getpid());
  if (absl::Status s = MakeDir(root); !s.ok()) return s;
  return root;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerCgroups>> WorkerCgroups::Make(uint64_t limit_bytes) {
  absl::StatusOr<std::string> v2 = SetUpV2();
  if (v2.ok()) {
    return std::unique_ptr<WorkerCgroups>(new WorkerCgroups(*std::move(v2), 2, limit_bytes));
  }
  absl::StatusOr<std::string> v1 = SetUpV1();
  if (v1.ok()) {
    std::unique_ptr<WorkerCgroups> cgroups(new WorkerCgroups(*std::move(v1), 1, limit_bytes));
    // A box made and removed now: a hierarchy that lets the directory be made but not its
    // limit be set (a read-only controller) is found here, not at the first worker.
    absl::StatusOr<std::unique_ptr<Box>> probe = cgroups->NewBox();
    if (!probe.ok()) return probe.status();
    return cgroups;
  }
  return absl::FailedPreconditionError(
      absl::StrCat(v2.status().message(), "; ", v1.status().message()));
}

WorkerCgroups::~WorkerCgroups() { RemoveCgroup(root_); }

std::string WorkerCgroups::Describe() const {
  return absl::StrCat("memory cgroup v", version_, " of ", base::FormatByteSize(limit_bytes_),
                      " per worker");
}

absl::StatusOr<std::unique_ptr<WorkerCgroups::Box>> WorkerCgroups::NewBox() {
  const std::string path = absl::StrCat(root_, "/w-", getpid(), "-", next_.fetch_add(1));
  if (absl::Status s = MakeDir(path); !s.ok()) return s;
  std::unique_ptr<Box> box(new Box(path, version_));
  const std::string limit = std::to_string(limit_bytes_);
  if (version_ == 2) {
    if (absl::Status s = WriteText(path + "/memory.max", limit); !s.ok()) return s;
    // No swap: past its limit a worker is ended, not slowed into measuring the disk.
    if (access((path + "/memory.swap.max").c_str(), F_OK) == 0) {
      (void)WriteText(path + "/memory.swap.max", "0");
    }
  } else {
    if (absl::Status s = WriteText(path + "/memory.limit_in_bytes", limit); !s.ok()) return s;
    if (access((path + "/memory.memsw.limit_in_bytes").c_str(), F_OK) == 0) {
      (void)WriteText(path + "/memory.memsw.limit_in_bytes", limit);
    }
  }
  return box;
}

WorkerCgroups::Box::~Box() {
  // The worker has been reaped; a process of it still dying keeps the directory a moment.
  for (int attempt = 0; attempt < 100 && rmdir(path_.c_str()) != 0 && errno == EBUSY; ++attempt) {
    KillAll();
    usleep(1000);
  }
}

absl::Status WorkerCgroups::Box::Add(pid_t pid) {
  return WriteText(path_ + "/cgroup.procs", std::to_string(pid));
}

void WorkerCgroups::Box::KillAll() {
  if (version_ == 2 && WriteText(path_ + "/cgroup.kill", "1").ok()) return;  // Linux 5.14
  for (pid_t pid : Procs(path_)) kill(pid, SIGKILL);
}

bool WorkerCgroups::Box::OomKilled() const {
  return Field(path_ + (version_ == 2 ? "/memory.events" : "/memory.oom_control"), "oom_kill") > 0;
}

}  // namespace kprof::server

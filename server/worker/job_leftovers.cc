#include "server/worker/job_leftovers.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/read_file.h"

namespace kprof::server {
namespace {

// An empty directory's size on tmpfs: "." and "..".
constexpr off_t kEmptyTmpfsDirectory = 40;

// Field 20 of /proc/self/stat, after the command name's closing parenthesis (a name may hold
// spaces and parentheses of its own); -1 when it cannot be read.
int ThreadsFromStat() {
  const int stat = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
  char text[1024];
  const ssize_t n = stat < 0 ? -1 : read(stat, text, sizeof text - 1);
  if (stat >= 0) close(stat);
  if (n <= 0) return -1;
  text[n] = 0;
  const char* end = std::strrchr(text, ')');
  if (end == nullptr) return -1;
  int field = 2, threads = -1;
  for (const char* p = end + 1; *p != 0 && threads < 0; ++p) {
    if (*p == ' ' && ++field == 20) threads = std::atoi(p + 1);
  }
  return threads;
}

}  // namespace

int CountThreads(bool skip_cuda) {
  if (!skip_cuda) {
    // procfs gives /proc/self/task a link count of its own links plus one per thread: one fstat
    // of a descriptor kept open counts them, where reading /proc/self/stat has the kernel format
    // some fifty fields. The links of its own are found once, against /proc/self/stat. A
    // function could close the descriptor or put another file on it to hide its threads: the
    // file's identity (procfs's own inode of this process's task directory, which no other file
    // has) comes with the same fstat, and a stranger is replaced by a fresh descriptor.
    static int task = -1;
    static struct stat identity {};
    static int own_links = 0;
    struct stat now {};
    if (task < 0 || fstat(task, &now) != 0 || now.st_dev != identity.st_dev ||
        now.st_ino != identity.st_ino) {
      task = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // an old number stays
      const int threads = ThreadsFromStat();
      if (task < 0 || fstat(task, &identity) != 0 || threads <= 0) {
        task = -1;
        if (threads > 0) return threads;
      } else {
        own_links = static_cast<int>(identity.st_nlink) - threads;
        return threads;
      }
    } else {
      return static_cast<int>(now.st_nlink) - own_links;
    }
  }
  return static_cast<int>(ThreadIds(skip_cuda).size());
}

std::vector<int> ThreadIds(bool skip_cuda) {
  std::vector<int> ids;
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(tasks)) {
      if (entry->d_name[0] == '.') continue;
      if (skip_cuda) {
        const std::optional<std::string> comm =
            base::ReadSmallFile(std::string("/proc/self/task/") + entry->d_name + "/comm");
        if (comm && comm->rfind("cuda", 0) == 0) continue;
      }
      ids.push_back(std::atoi(entry->d_name));
    }
    closedir(tasks);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

FileIdentity IdentityOf(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return {};
  return {st.st_dev, st.st_ino};
}

ScratchDirectory::ScratchDirectory(const std::string& path) {
  if (path.empty()) return;
  dir_ = opendir(path.c_str());
  struct stat st {};
  if (dir_ != nullptr && fstat(dirfd(dir_), &st) == 0) {
    identity_ = {st.st_dev, st.st_ino};
    struct statfs fs {};
    tmpfs_ = fstatfs(dirfd(dir_), &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
             st.st_size == kEmptyTmpfsDirectory;
  }
}

ScratchDirectory::~ScratchDirectory() {
  if (dir_ != nullptr) closedir(dir_);
}

std::string ScratchDirectory::Leftovers() const {
  if (dir_ == nullptr) return "";
  struct stat st {};
  if (fstat(dirfd(dir_), &st) != 0 || !(FileIdentity{st.st_dev, st.st_ino} == identity_)) {
    return "closed or replaced the descriptor of its scratch directory";
  }
  if (tmpfs_ && st.st_size == kEmptyTmpfsDirectory) return "";
  rewinddir(dir_);
  int entries = 0;
  std::string first;
  while (dirent* entry = readdir(dir_)) {
    if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
    if (entries++ == 0) first = entry->d_name;
  }
  if (entries == 0) return "";
  return absl::StrCat("left ", entries, " file(s) in its scratch directory ($TMPDIR, first '",
                      absl::CHexEscape(first), "')");
}

std::string Disturbance(int baseline_threads, bool skip_cuda, const ScratchDirectory& scratch) {
  // One poll asks after all three: a closed descriptor is POLLNVAL.
  pollfd streams[3] = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}};
  std::vector<std::string> closed;
  if (poll(streams, 3, 0) >= 0) {
    for (const pollfd& p : streams) {
      if ((p.revents & POLLNVAL) != 0) closed.push_back(std::to_string(p.fd));
    }
  }
  if (!closed.empty()) {
    return "closed the worker's standard streams (" + absl::StrJoin(closed, ", ") + ")";
  }
  int extra = CountThreads(skip_cuda) - baseline_threads;
  // A thread the job joined as it returned has told its joiner it is done before the kernel
  // takes it out of /proc/self/task: give it up to 10 ms to go (a worker is not replaced for
  // it; only a job that leaves threads behind pays the wait).
  for (int wait = 0; extra > 0 && wait < 50; ++wait) {
    usleep(200);
    extra = CountThreads(skip_cuda) - baseline_threads;
  }
  // A thread the CUDA driver has just started names itself a moment later: give it up to
  // 100 ms to say it is the driver's before calling it a leftover.
  for (int wait = 0; skip_cuda && extra > 0 && wait < 20; ++wait) {
    usleep(5000);
    extra = CountThreads(skip_cuda) - baseline_threads;
  }
  if (extra > 0) return "left " + std::to_string(extra) + " thread(s) running";
  return scratch.Leftovers();
}

}  // namespace kprof::server

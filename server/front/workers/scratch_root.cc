#include "server/front/workers/scratch_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/log.h"

namespace kprof::server {

namespace {

// Whether `user` may search directory `st` (permission bits alone: the user has no
// capabilities).
bool Searchable(const struct stat& st, const WorkerUser& user) {
  if (st.st_uid == user.uid) return (st.st_mode & S_IXUSR) != 0;
  const bool in_group = st.st_gid == user.gid || std::find(user.groups.begin(), user.groups.end(),
                                                           st.st_gid) != user.groups.end();
  if (in_group) return (st.st_mode & S_IXGRP) != 0;
  return (st.st_mode & S_IXOTH) != 0;
}

// A root being made: not yet locked, not yet a daemon's.
constexpr char kMakingPrefix[] = ".kprofd-making.";
// How old such a directory must be to be taken for one a daemon killed while making it left.
constexpr int kMakingSeconds = 60;

// Removes what daemons of this user killed before they could clean up left behind in `base`:
// roots no daemon holds a lock on, and roots being made that have been so for a minute.
void SweepLeftBehind(const std::string& base) {
  DIR* dir = opendir(base.c_str());
  if (dir == nullptr) return;
  while (dirent* entry = readdir(dir)) {
    const std::string_view name = entry->d_name;
    const bool making = name.substr(0, sizeof kMakingPrefix - 1) == kMakingPrefix;
    int pid = 0;
    int end = 0;
    if (!making &&
        (std::sscanf(entry->d_name, "kprofd.%d.%n", &pid, &end) != 1 || end == 0 || pid <= 0)) {
      continue;
    }
    const std::string path = base + "/" + entry->d_name;
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
      continue;
    }
    if (making && time(nullptr) - st.st_mtime < kMakingSeconds) continue;
    // Its daemon holds a lock on it while it runs: a process id says nothing across PID
    // namespaces (a daemon in a container, or one the host sees under another number).
    const int held = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (held < 0) continue;
    if (flock(held, LOCK_EX | LOCK_NB) == 0) RemoveTree(path);
    close(held);
  }
  closedir(dir);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ScratchRoot>> ScratchRoot::Make(
    std::string base, const std::optional<WorkerUser>& user) {
  if (base.empty()) {
    const char* tmpdir = std::getenv("TMPDIR");
    base = access("/dev/shm", W_OK | X_OK) == 0    ? "/dev/shm"
           : tmpdir != nullptr && tmpdir[0] == '/' ? tmpdir
                                                   : "/tmp";
  }
  char resolved[PATH_MAX];
  if (realpath(base.c_str(), resolved) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("the scratch directory '", base, "' (--scratch-dir): ", std::strerror(errno)));
  }
  base = resolved;
  if (user.has_value()) {
    for (std::string dir = base;; dir = dir.substr(0, std::max<size_t>(dir.rfind('/'), 1))) {
      struct stat st {};
      if (stat(dir.c_str(), &st) == 0 && !Searchable(st, *user)) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "the scratch directory '%s' (--scratch-dir) is out of the workers' reach: uid %d "
            "may not search '%s' (mode %04o); choose a directory every user can reach, as "
            "/dev/shm",
            base, user->uid, dir, st.st_mode & 07777));
      }
      if (dir == "/") break;
    }
  }
  SweepLeftBehind(base);
  // Made under a name the sweep of a daemon starting meanwhile leaves alone (unless it is old),
  // locked, then named as a daemon's root: a root is never unlocked under its name.
  std::string fresh = absl::StrCat(base, "/", kMakingPrefix, getpid(), ".XXXXXX");
  if (mkdtemp(fresh.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make a scratch directory in '", base,
                     "' (--scratch-dir sets where): ", std::strerror(errno)));
  }
  const std::string path =
      absl::StrCat(base, "/kprofd.", getpid(), ".", fresh.substr(fresh.size() - 6));
  const int lock = open(fresh.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0 ||
      renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, path.c_str(), RENAME_NOREPLACE) != 0) {
    const int error = errno;
    if (lock >= 0) close(lock);
    RemoveTree(fresh);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot lock the scratch directory '", path, "': ", std::strerror(error)));
  }
  // Workers of another user reach their own directories through it; none may list it.
  if (user.has_value()) chmod(path.c_str(), 0711);
  return std::unique_ptr<ScratchRoot>(new ScratchRoot(std::move(path), lock));
}

ScratchRoot::~ScratchRoot() {
  RemoveTree(path_);
  close(lock_);
}

bool RemoveTree(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return errno == ENOENT;
  if (!S_ISDIR(st.st_mode)) return unlink(path.c_str()) == 0;  // links too, never followed
  // A job may leave a directory made without rights for its owner (mkdir with mode 0): they are
  // given back first, or a daemon that is not root could neither list nor empty it.
  if ((st.st_mode & S_IRWXU) != S_IRWXU) chmod(path.c_str(), S_IRWXU);
  if (DIR* dir = opendir(path.c_str())) {
    while (dirent* entry = readdir(dir)) {
      const std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      RemoveTree(path + "/" + entry->d_name);
    }
    closedir(dir);
  }
  return rmdir(path.c_str()) == 0;
}

}  // namespace kprof::server

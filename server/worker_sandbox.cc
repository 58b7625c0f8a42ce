#include "server/worker_sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kprof::server {
namespace {

constexpr uint64_t kRead =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr uint64_t kFileRights =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE;

// Every filesystem right the kernel's Landlock ABI knows.
uint64_t HandledRights(int abi) {
  uint64_t rights =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
      LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
      LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
      LANDLOCK_ACCESS_FS_MAKE_SYM;
#ifdef LANDLOCK_ACCESS_FS_REFER
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
  return rights;
}

bool Within(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir == "/" || path[dir.size()] == '/'));
}

class Ruleset {
 public:
  explicit Ruleset(int fd) : fd_(fd) {}
  ~Ruleset() { close(fd_); }
  int fd() const { return fd_; }

  // Grants `rights` beneath `path`, except beneath any of `excluded`: where an excluded path
  // lies inside, the grant goes to its siblings instead, one level at a time.
  void Grant(const std::string& path, uint64_t rights, const std::vector<std::string>& excluded) {
    bool contains_excluded = false;
    for (const std::string& x : excluded) {
      if (Within(path, x)) return;  // excluded itself
      if (Within(x, path)) contains_excluded = true;
    }
    if (!contains_excluded) {
      Add(path, rights);
      return;
    }
    DIR* dir = opendir(path.c_str());
    if (dir == nullptr) return;
    while (dirent* entry = readdir(dir)) {
      const std::string name = entry->d_name;
      if (name == "." || name == "..") continue;
      Grant(path == "/" ? "/" + name : path + "/" + name, rights, excluded);
    }
    closedir(dir);
  }

 private:
  void Add(const std::string& path, uint64_t rights) {
    const int fd = open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= kFileRights;
    landlock_path_beneath_attr rule{};
    rule.allowed_access = rights;
    rule.parent_fd = fd;
    syscall(SYS_landlock_add_rule, fd_, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    close(fd);
  }

  int fd_;
};

}  // namespace

absl::Status ApplyWorkerSandbox(const SandboxPaths& paths) {
  const long abi =
      syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    return absl::UnimplementedError(
        absl::StrCat("no Landlock in this kernel (", std::strerror(errno), ")"));
  }
  const uint64_t handled = HandledRights(static_cast<int>(abi));
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = handled;
  const long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("landlock_create_ruleset: ", std::strerror(errno)));
  }
  Ruleset ruleset(static_cast<int>(fd));
  ruleset.Grant("/", kRead, paths.unreadable);
  std::vector<std::string> unwritable = paths.unwritable;
  unwritable.insert(unwritable.end(), paths.unreadable.begin(), paths.unreadable.end());
  for (const char* scratch : {"/tmp", "/dev", "/dev/shm", "/var/tmp"}) {
    ruleset.Grant(scratch, handled, unwritable);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      syscall(SYS_landlock_restrict_self, ruleset.fd(), 0) != 0) {
    return absl::InternalError(absl::StrCat("landlock_restrict_self: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kprof::server

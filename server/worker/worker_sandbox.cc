#include "server/worker/worker_sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/read_file.h"

// Rights and scopes of Landlock ABIs newer than Debian 12's kernel headers (6.1, ABI 2); the
// kernel says which it has, and a worker built here asks for what the running kernel offers.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)  // ABI 3
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)  // ABI 5
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)  // ABI 4
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)  // ABI 6
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

namespace kprof::server {
namespace {

// landlock_ruleset_attr as of ABI 6; the kernel takes the prefix its ABI knows (by size).
struct RulesetAttr {
  uint64_t handled_access_fs = 0;
  uint64_t handled_access_net = 0;
  uint64_t scoped = 0;
};

size_t RulesetAttrSize(int abi) {
  if (abi >= 6) return sizeof(RulesetAttr);
  if (abi >= 4) return offsetof(RulesetAttr, scoped);
  return offsetof(RulesetAttr, handled_access_net);
}

constexpr uint64_t kRead =
    LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
// The rights a rule on a file (not a directory) may carry.
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                                 LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                 LANDLOCK_ACCESS_FS_IOCTL_DEV;

// Every filesystem right the kernel's Landlock ABI knows.
uint64_t HandledRights(int abi) {
  uint64_t rights =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
      LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
      LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
      LANDLOCK_ACCESS_FS_MAKE_SYM;
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) rights |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) rights |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
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

absl::StatusOr<std::string> ApplyWorkerSandbox(const SandboxPaths& paths) {
  const long abi =
      syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    return absl::UnimplementedError(
        absl::StrCat("no Landlock in this kernel (", std::strerror(errno), ")"));
  }
  const uint64_t handled = HandledRights(static_cast<int>(abi));
  RulesetAttr attr;
  attr.handled_access_fs = handled;
  // No TCP at all (no rule grants any port), no signals to processes outside the worker's
  // domain (the front), no abstract Unix sockets bound outside it.
  if (abi >= 4)
    attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
  if (abi >= 6) attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL;
  const long fd =
      syscall(SYS_landlock_create_ruleset, &attr, RulesetAttrSize(static_cast<int>(abi)), 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("landlock_create_ruleset: ", std::strerror(errno)));
  }
  Ruleset ruleset(static_cast<int>(fd));
  // Everything readable but the daemon's secrets and /dev, whose nodes (disks, memory,
  // terminals) a worker of a root daemon could otherwise open; /dev/shm, the host's shared
  // memory, goes with it.
  std::vector<std::string> unreadable = paths.unreadable;
  unreadable.push_back("/dev");
  ruleset.Grant("/", kRead, unreadable);
  // Of /dev, what a measured function and the GPU drivers use: the null, zero and random
  // devices, and NVIDIA's nodes (nvidia*, nvidia-caps/ on a discrete GPU; nvhost-*, nvmap,
  // nvgpu/ on a Jetson) — by those names, not by "nv", which nvme disks share.
  constexpr uint64_t kDevice = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                               LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_IOCTL_DEV;
  const uint64_t device_rights = kDevice & handled;
  for (const char* node : {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}) {
    ruleset.Grant(node, device_rights, {});
  }
  if (DIR* dev = opendir("/dev")) {
    while (dirent* entry = readdir(dev)) {
      const std::string_view name = entry->d_name;
      bool gpu = false;
      for (const char* prefix : {"nvidia", "nvhost-", "nvmap", "nvgpu"}) {
        gpu |= name.rfind(prefix, 0) == 0;  // not nvme*, nvram: disks and firmware
      }
      if (gpu) {
        ruleset.Grant(std::string("/dev/") + entry->d_name, device_rights, {});
      }
    }
    closedir(dev);
  }
  // Writable: the worker's own scratch directory alone (its TMPDIR), where it may make and
  // remove files and directories, but no links, devices or sockets. /tmp, /var/tmp and
  // /dev/shm are shared with the host and with other clients' workers: not writable.
  if (!paths.scratch.empty()) {
    constexpr uint64_t kScratch = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                  LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR |
                                  LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_DIR |
                                  LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_TRUNCATE;
    ruleset.Grant(paths.scratch, kScratch & handled, {});
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      syscall(SYS_landlock_restrict_self, ruleset.fd(), 0) != 0) {
    return absl::InternalError(absl::StrCat("landlock_restrict_self: ", std::strerror(errno)));
  }
  return absl::StrCat("Landlock ABI ", abi, ": files", abi >= 3 ? " (with truncation)" : "",
                      abi >= 4 ? ", TCP" : "", abi >= 6 ? ", signals, abstract sockets" : "");
}

namespace {

// seccomp_rule_add for a syscall libseccomp may not know on this architecture: skipped then.
class Filter {
 public:
  Filter() : ctx_(seccomp_init(SCMP_ACT_ALLOW)) {}
  ~Filter() {
    if (ctx_ != nullptr) seccomp_release(ctx_);
  }
  bool ok() const { return ctx_ != nullptr && error_.empty(); }
  const std::string& error() const { return error_; }
  scmp_filter_ctx ctx() const { return ctx_; }

  template <typename... Args>
  void Deny(const char* name, uint32_t action, Args... args) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) return;  // not a syscall here (e.g. no alarm on arm64)
    DenyNumber(nr, name, action, args...);
  }

  // For a syscall newer than libseccomp's tables (numbered alike on every architecture since
  // Linux 5.1).
  template <typename... Args>
  void DenyNumber(int nr, const char* name, uint32_t action, Args... args) {
    const scmp_arg_cmp cmps[] = {args..., scmp_arg_cmp{}};
    const int rc = seccomp_rule_add_array(ctx_, action, nr, sizeof...(Args), cmps);
    if (rc != 0 && error_.empty()) {
      error_ = absl::StrCat("seccomp rule for ", name, ": ", std::strerror(-rc));
    }
  }

 private:
  scmp_filter_ctx ctx_;
  std::string error_;
};

}  // namespace

std::string FormatWorkerUser(const WorkerUser& user) {
  std::string text = absl::StrCat(user.uid, ":", user.gid);
  for (size_t i = 0; i < user.groups.size(); ++i) {
    absl::StrAppend(&text, i == 0 ? ":" : ",", user.groups[i]);
  }
  return text;
}

absl::StatusOr<WorkerUser> ParseWorkerUser(const std::string& text) {
  WorkerUser user;
  unsigned long uid = 0, gid = 0;
  int end = 0;
  if (std::sscanf(text.c_str(), "%lu:%lu%n", &uid, &gid, &end) != 2) {
    return absl::InvalidArgumentError("--user wants UID:GID[:G1,G2...] of a user other than root");
  }
  user.uid = static_cast<uid_t>(uid);
  user.gid = static_cast<gid_t>(gid);
  if (user.uid != uid || user.gid != gid || user.uid == 0 || user.gid == 0 ||
      user.uid == static_cast<uid_t>(-1) || user.gid == static_cast<gid_t>(-1)) {
    return absl::InvalidArgumentError("--user: not a user other than root");
  }
  for (const char* p = text.c_str() + end; *p == ':' || *p == ',';) {
    char* next = nullptr;
    const unsigned long group = std::strtoul(p + 1, &next, 10);
    if (next == p + 1) return absl::InvalidArgumentError("--user: a group that is not a number");
    user.groups.push_back(static_cast<gid_t>(group));
    p = next;
  }
  return user;
}

absl::Status BecomeUser(const WorkerUser& user, pid_t parent) {
  // Keep the permitted capabilities through the change of uid (DropCapabilities then keeps
  // CAP_PERFMON alone, and raises it again).
  if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0) {
    return absl::InternalError(absl::StrCat("PR_SET_KEEPCAPS: ", std::strerror(errno)));
  }
  if (setgroups(user.groups.size(), user.groups.data()) != 0 ||
      setresgid(user.gid, user.gid, user.gid) != 0 ||
      setresuid(user.uid, user.uid, user.uid) != 0) {
    return absl::InternalError(absl::StrCat("cannot become uid ", user.uid, " gid ", user.gid, ": ",
                                            std::strerror(errno)));
  }
  prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
  uid_t ruid, euid, suid;
  gid_t rgid, egid, sgid;
  if (getresuid(&ruid, &euid, &suid) != 0 || getresgid(&rgid, &egid, &sgid) != 0 ||
      ruid != user.uid || euid != user.uid || suid != user.uid || rgid != user.gid ||
      egid != user.gid || sgid != user.gid) {
    return absl::InternalError(absl::StrCat("did not become uid ", user.uid, " gid ", user.gid));
  }
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (parent > 0 && getppid() != parent) {
    return absl::FailedPreconditionError("the daemon is gone");
  }
  return absl::OkStatus();
}

namespace {
constexpr int kPerfmon = 38;  // CAP_PERFMON, newer than some headers
}  // namespace

void DropBoundingSet() {
  // The highest capability this kernel knows; the bounding set is dropped one by one.
  int last = CAP_LAST_CAP;
  if (!absl::SimpleAtoi(base::ReadFirstLine("/proc/sys/kernel/cap_last_cap").value_or(""), &last)) {
    last = CAP_LAST_CAP;
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  for (int cap = 0; cap <= last; ++cap) {
    // Without CAP_SETPCAP (an unprivileged daemon) the bounding set stays, and so does its
    // emptiness: such a process has nothing in it to use.
    if (cap != kPerfmon) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  }
}

absl::Status DropCapabilities() {
  DropBoundingSet();
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) {
    return absl::InternalError(absl::StrCat("capget: ", std::strerror(errno)));
  }
  const uint32_t perfmon_bit = 1u << (kPerfmon - 32);
  // Nothing to give up (an unprivileged daemon, or the unit's, whose filter denies capset):
  // done without the call.
  if (data[0].effective == 0 && data[0].permitted == 0 && data[0].inheritable == 0 &&
      (data[1].permitted & ~perfmon_bit) == 0 && data[1].effective == data[1].permitted &&
      data[1].inheritable == 0) {
    return absl::OkStatus();
  }
  data[0] = {0, 0, 0};
  data[1].permitted &= perfmon_bit;
  data[1].effective = data[1].permitted;  // raised again after a change of uid cleared it
  data[1].inheritable = 0;
  if (syscall(SYS_capset, &header, data) != 0) {
    return absl::InternalError(absl::StrCat("capset: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

namespace {

// No processes but threads, and nothing aimed at another process (`self` is this one's pid).
void DenyOtherProcesses(Filter& filter, uint32_t eperm, scmp_datum_t self) {
  // No new processes and no exec: threads only.
  for (const char* name : {"fork", "vfork", "execve", "execveat"}) filter.Deny(name, eperm);
  filter.Deny("clone", eperm, SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
  filter.Deny("clone3", SCMP_ACT_ERRNO(ENOSYS));

  // Nothing aimed at another process. pid 0 and negative pids name process groups.
  filter.Deny("kill", eperm, SCMP_A0_32(SCMP_CMP_NE, self));
  filter.Deny("tgkill", eperm, SCMP_A0_32(SCMP_CMP_NE, self));
  filter.Deny("rt_sigqueueinfo", eperm, SCMP_A0_32(SCMP_CMP_NE, self));
  filter.Deny("rt_tgsigqueueinfo", eperm, SCMP_A0_32(SCMP_CMP_NE, self));
  for (const char* name :
       {"tkill", "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "ptrace", "process_vm_readv",
        "process_vm_writev", "kcmp", "process_madvise", "setpriority", "ioprio_set"}) {
    filter.Deny(name, eperm);
  }
  for (const char* name : {"migrate_pages", "move_pages"}) {
    filter.Deny(name, eperm, SCMP_A0_32(SCMP_CMP_NE, 0));
  }
  filter.Deny("perf_event_open", eperm, SCMP_A1_32(SCMP_CMP_NE, 0));
}

// Nothing a later job would inherit.
void DenyWhatOutlivesAJob(Filter& filter, uint32_t eperm) {
  // Limits: read them, never change them (the next job would inherit the change).
  filter.Deny("setrlimit", eperm);
  filter.Deny("prlimit64", eperm, SCMP_A2(SCMP_CMP_NE, 0));
  filter.Deny("prlimit64", eperm, SCMP_A0_32(SCMP_CMP_NE, 0));

  // What a later job would inherit: timers that signal the worker, signal dispositions (the
  // crash handlers are in place already), the working directory, the umask, the placement
  // the daemon gave the worker (CPUs, priority, scheduling class).
  for (const char* name :
       {"alarm", "setitimer", "timer_create", "chdir", "fchdir", "umask", "sched_setaffinity",
        "sched_setscheduler", "sched_setparam", "sched_setattr"}) {
    filter.Deny(name, eperm);
  }
  filter.Deny("rt_sigaction", eperm, SCMP_A1(SCMP_CMP_NE, 0));
}

// Nothing of the worker's identity or of the host outside the process.
void DenyTheOutside(Filter& filter, uint32_t eperm) {
  // The worker's identity and what lies outside the process; io_uring, which does what the
  // calls above do (IORING_OP_SOCKET opens sockets) unfiltered.
  // clang-format off
  static constexpr const char* kOutside[] = {
      "setsid", "setpgid", "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid",
      "setfsuid", "setfsgid", "setgroups", "capset", "mount", "umount2", "pivot_root", "chroot",
      "unshare", "setns", "fsopen", "fsmount", "fspick", "move_mount", "open_tree",
      "mount_setattr", "keyctl", "add_key", "request_key", "bpf", "init_module", "finit_module",
      "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
      "quotactl", "syslog", "name_to_handle_at", "open_by_handle_at", "iopl", "ioperm",
      "userfaultfd", "chmod", "fchmod", "fchmodat", "chown", "fchown", "fchownat", "lchown",
      "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
      "setdomainname", "personality", "io_uring_setup", "io_uring_enter", "io_uring_register"};
  // clang-format on
  for (const char* name : kOutside) filter.Deny(name, eperm);
  // System V IPC and POSIX message queues are the host's, not a namespace's: a segment, a
  // semaphore or a queue one client's function made would be there for another's to find.
  for (const char* name : {"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop",
                           "semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink",
                           "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr"}) {
    filter.Deny(name, eperm);
  }
  filter.DenyNumber(452, "fchmodat2", eperm);  // Linux 6.6, newer than libseccomp 2.5's tables
}

// No signals by way of a descriptor, and no sockets but netlink's and stream pairs.
void DenySignalsAndSockets(Filter& filter, uint32_t eperm) {
  // A descriptor's owner is who gets its SIGIO (or the signal F_SETSIG names): another process
  // would be signalled by a write to a socketpair.
  for (const int command : {F_SETOWN, F_SETOWN_EX, F_SETSIG}) {
    filter.Deny("fcntl", eperm, SCMP_A1_32(SCMP_CMP_EQ, static_cast<scmp_datum_t>(command)));
  }
  for (const scmp_datum_t request : {0x8901 /* FIOSETOWN */, 0x8902 /* SIOCSPGRP */}) {
    filter.Deny("ioctl", eperm, SCMP_A1_32(SCMP_CMP_EQ, request));
  }

  // No network, and no way to the host's services: sockets of the netlink family only (the
  // C library asks the kernel about interfaces that way). No Unix socket either — one would
  // reach whatever listens on a path (a root daemon's worker is still uid 0); the job socket
  // was handed over at start, and socketpair makes only a pair of one's own.
  for (int family = 0; family < AF_NETLINK; ++family) {
    filter.Deny("socket", eperm, SCMP_A0_32(SCMP_CMP_EQ, static_cast<scmp_datum_t>(family)));
  }
  // A pair of stream sockets only: a datagram one could still send to any socket path by
  // address (sendto), the system log's say.
  filter.Deny(
      "socketpair", eperm,
      SCMP_A1_32(SCMP_CMP_MASKED_EQ, ~static_cast<scmp_datum_t>(SOCK_CLOEXEC | SOCK_NONBLOCK),
                 static_cast<scmp_datum_t>(SOCK_DGRAM)));
  filter.Deny(
      "socketpair", eperm,
      SCMP_A1_32(SCMP_CMP_MASKED_EQ, ~static_cast<scmp_datum_t>(SOCK_CLOEXEC | SOCK_NONBLOCK),
                 static_cast<scmp_datum_t>(SOCK_SEQPACKET)));
  filter.Deny("socket", eperm, SCMP_A0_32(SCMP_CMP_GT, static_cast<scmp_datum_t>(AF_NETLINK)));
}

}  // namespace

absl::Status ApplyWorkerSyscallFilter() {
  Filter filter;
  if (filter.ctx() == nullptr) return absl::InternalError("seccomp_init failed");
  // Every thread of the worker, not only this one: a GPU worker's driver has started threads
  // of its own by now, and a function could make one of them do what this one may not.
  if (const int rc = seccomp_attr_set(filter.ctx(), SCMP_FLTATR_CTL_TSYNC, 1); rc != 0) {
    return absl::InternalError(absl::StrCat("seccomp TSYNC: ", std::strerror(-rc)));
  }
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  DenyOtherProcesses(filter, eperm, static_cast<scmp_datum_t>(getpid()));
  DenyWhatOutlivesAJob(filter, eperm);
  DenyTheOutside(filter, eperm);
  DenySignalsAndSockets(filter, eperm);
  if (!filter.ok()) return absl::InternalError(filter.error());
  // Not dumpable: no process of the same user may open this one's /proc/PID/mem, even where
  // there is no Landlock and ptrace_scope would allow it.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    return absl::InternalError(absl::StrCat("PR_SET_DUMPABLE: ", std::strerror(errno)));
  }
  // no_new_privs lets an unprivileged process load a filter; Landlock has set it already.
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return absl::InternalError(absl::StrCat("PR_SET_NO_NEW_PRIVS: ", std::strerror(errno)));
  }
  if (const int rc = seccomp_load(filter.ctx()); rc != 0) {
    return absl::InternalError(absl::StrCat("seccomp_load: ", std::strerror(-rc)));
  }
  return absl::OkStatus();
}

}  // namespace kprof::server

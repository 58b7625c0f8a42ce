#include "server/front/worker_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/byte_size.h"
#include "base/log.h"
#include "proto/status.h"
#include "server/ipc/argument_data.h"
#include "server/ipc/wire.h"
#include "server/worker/worker_job.h"

extern char** environ;

namespace kprof::server {
namespace {

constexpr int kChildSocket = 3;

}  // namespace

std::string DescribeWaitStatus(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    return absl::StrCat("killed by SIG", abbrev != nullptr ? abbrev : std::to_string(sig), " (",
                        strsignal(sig), ")");
  }
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  return "ended";
}

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Spawn(const WorkerOptions& options) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  int child = sockets[1];
  if (child == kChildSocket) {  // dup2 onto itself would keep close-on-exec set
    child = fcntl(sockets[1], F_DUPFD_CLOEXEC, 10);
    close(sockets[1]);
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, child, kChildSocket);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  // Its own process group (so that everything it starts can be killed), no signals blocked
  // (the daemon blocks its own for a signal thread), default dispositions.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::string scratch;
  if (!options.scratch_root.empty()) {
    std::string name = options.scratch_root + "/worker-XXXXXX";
    if (mkdtemp(name.data()) == nullptr) {
      const int error = errno;
      close(sockets[0]);
      close(child);
      posix_spawn_file_actions_destroy(&actions);
      posix_spawnattr_destroy(&attributes);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make the worker's scratch directory in ", options.scratch_root, ": ",
                       std::strerror(error)));
    }
    scratch = std::move(name);
    if (options.user.has_value() &&
        chown(scratch.c_str(), options.user->uid, options.user->gid) != 0) {
      const int error = errno;
      RemoveTree(scratch);
      close(sockets[0]);
      close(child);
      posix_spawn_file_actions_destroy(&actions);
      posix_spawnattr_destroy(&attributes);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot give the worker's scratch directory to uid ", options.user->uid,
                       ": ", std::strerror(error)));
    }
  }
  std::unique_ptr<WorkerCgroups::Box> box;
  if (options.cgroups != nullptr) {
    absl::StatusOr<std::unique_ptr<WorkerCgroups::Box>> made = options.cgroups->NewBox();
    if (!made.ok()) {
      if (!scratch.empty()) RemoveTree(scratch);
      close(sockets[0]);
      close(child);
      posix_spawn_file_actions_destroy(&actions);
      posix_spawnattr_destroy(&attributes);
      return absl::FailedPreconditionError(
          absl::StrCat("cannot make the worker's memory cgroup: ", made.status().message()));
    }
    box = *std::move(made);
  }
  // The environment, with TMPDIR naming the scratch directory (the one place it may write).
  std::vector<std::string> environment_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!scratch.empty() && std::strncmp(*e, "TMPDIR=", 7) == 0) continue;
    environment_strings.emplace_back(*e);
  }
  if (!scratch.empty()) environment_strings.push_back("TMPDIR=" + scratch);
  std::vector<char*> environment;
  for (std::string& e : environment_strings) environment.push_back(e.data());
  environment.push_back(nullptr);

  const std::string device = base::DeviceSpec(options.device);
  const std::string frame = std::to_string(options.max_frame_bytes);
  const std::string data = std::to_string(options.max_data_bytes);
  const std::string open_modules = std::to_string(options.max_open_modules);
  const std::string parent = std::to_string(getpid());
  std::vector<std::string> sandbox;
  for (const std::string& p : options.unreadable) sandbox.insert(sandbox.end(), {"--no-read", p});
  if (!scratch.empty()) sandbox.insert(sandbox.end(), {"--scratch", scratch});
  if (options.user.has_value()) {
    sandbox.insert(sandbox.end(), {"--user", FormatWorkerUser(*options.user)});
  }
  if (options.describer) sandbox.push_back("--describer");
  if (options.busy_poll > absl::ZeroDuration()) {
    sandbox.insert(sandbox.end(), {"--busy-poll-us",
                                   std::to_string(absl::ToInt64Microseconds(options.busy_poll))});
  }
  if (!options.placement.cpus.empty()) {
    sandbox.insert(sandbox.end(), {"--cpus", core::FormatCpuList(options.placement.cpus)});
  }
  if (const std::string priority = core::FormatPriority(options.placement.priority);
      !priority.empty()) {
    sandbox.insert(sandbox.end(), {"--priority", priority});
  }
  std::vector<char*> argv = {const_cast<char*>(options.executable.c_str()),
                             const_cast<char*>("--device"),
                             const_cast<char*>(device.c_str()),
                             const_cast<char*>("--max-frame-bytes"),
                             const_cast<char*>(frame.c_str()),
                             const_cast<char*>("--max-data-bytes"),
                             const_cast<char*>(data.c_str()),
                             const_cast<char*>("--open-modules"),
                             const_cast<char*>(open_modules.c_str()),
                             const_cast<char*>("--parent-pid"),
                             const_cast<char*>(parent.c_str())};
  for (std::string& s : sandbox) argv.push_back(s.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int error = posix_spawn(&pid, options.executable.c_str(), &actions, &attributes,
                                argv.data(), environment.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(child);
  if (error != 0) {
    close(sockets[0]);
    if (!scratch.empty()) RemoveTree(scratch);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start the worker '", options.executable, "': ", std::strerror(error)));
  }
  std::unique_ptr<WorkerProcess> worker(new WorkerProcess(
      pid, sockets[0], options.max_frame_bytes, std::move(scratch), std::move(box),
      options.cgroups != nullptr ? options.cgroups->limit_bytes() : 0));
  // Into its cgroup before its first job (its start-up, a few pages, stays charged outside).
  if (worker->box_ != nullptr) {
    if (absl::Status s = worker->box_->Add(pid); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot put the worker into its memory cgroup: ", s.message()));
    }
  }
  return worker;
}

WorkerProcess::~WorkerProcess() {
  close(socket_);
  if (pid_ > 0) Reap(absl::Seconds(1));
  // The worker is gone and could start no process: nothing writes here any more.
  if (!scratch_.empty() && !RemoveTree(scratch_)) {
    base::Log(base::LogSeverity::kWarning,
              absl::StrCat("cannot remove the worker's scratch directory ", scratch_));
  }
}

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
  // What daemons of this user killed before they could clean up left behind.
  if (DIR* dir = opendir(base.c_str())) {
    while (dirent* entry = readdir(dir)) {
      int pid = 0;
      int end = 0;
      if (std::sscanf(entry->d_name, "kprofd.%d.%n", &pid, &end) != 1 || end == 0 || pid <= 0) {
        continue;
      }
      const std::string path = base + "/" + entry->d_name;
      struct stat st {};
      if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
        continue;
      }
      // Its daemon holds a lock on it while it runs: a process id says nothing across PID
      // namespaces (a daemon in a container, or one the host sees under another number).
      const int held = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
      if (held < 0) continue;
      if (flock(held, LOCK_EX | LOCK_NB) == 0) RemoveTree(path);
      close(held);
    }
    closedir(dir);
  }
  std::string path = absl::StrCat(base, "/kprofd.", getpid(), ".XXXXXX");
  if (mkdtemp(path.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make a scratch directory in '", base,
                     "' (--scratch-dir sets where): ", std::strerror(errno)));
  }
  const int lock = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (lock >= 0) close(lock);
    RemoveTree(path);
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

std::string WorkerProcess::Reap(absl::Duration grace) {
  const absl::Time deadline = absl::Now() + grace;
  // Woken the moment it exits (a pidfd polls readable then), where a loop of waitid calls would
  // sleep in steps; the loop below then finds it at once.
  if (const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0)); pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    const int ms = static_cast<int>(std::max<int64_t>(absl::ToInt64Milliseconds(grace), 0));
    while (poll(&p, 1, ms) < 0 && errno == EINTR) {
    }
    close(pidfd);
  }
  while (true) {
    // Wait for the exit without reaping: while the worker is a zombie its pid, and so its
    // process group's id, cannot be reused, and whatever it forked can still be killed.
    siginfo_t info{};
    const int r = waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid_) break;
    if (r < 0 && errno != EINTR) {
      pid_ = -1;
      return "gone";
    }
    if (absl::Now() >= deadline) return KillAndReap();
    absl::SleepFor(absl::Milliseconds(2));
  }
  return KillAndReap();
}

std::string WorkerProcess::Ended(std::string how) const {
  if (box_ != nullptr && box_->OomKilled()) {
    absl::StrAppend(&how, ": it went over its memory limit of ",
                    base::FormatByteSize(memory_limit_),
                    " (--worker-memory-limit; its cgroup counts shared mappings and "
                    "scratch files too) and the kernel ended it");
  }
  return how;
}

std::string WorkerProcess::KillAndReap() {
  kill(-pid_, SIGKILL);  // the whole group: whatever the function started goes too
  if (box_ != nullptr) box_->KillAll();
  // A process inside an uninterruptible kernel call (a GPU driver's, on a GPU fallen off the
  // bus) dies only when that call returns, if ever: wait a while, then leave it to a thread.
  const pid_t pid = std::exchange(pid_, -1);
  const absl::Duration grace = absl::Seconds(5);
  const absl::Time deadline = absl::Now() + grace;
  int status = 0;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return DescribeWaitStatus(status);
    if (r < 0 && errno != EINTR) return "gone";
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(2));
  }
  std::thread([pid] {
    int ignored = 0;
    while (waitpid(pid, &ignored, 0) < 0 && errno == EINTR) {
    }
  }).detach();
  return absl::StrCat("killed, but still not gone ", absl::FormatDuration(grace),
                      " later (stuck in the kernel, as in a GPU driver's call)");
}

absl::Status WorkerProcess::Send(const kprof::worker::v1::WorkerRequest& request,
                                 absl::Span<const int> module_fds) {
  if (pid_ <= 0) return absl::UnavailableError("the worker is not running");
  return channel_.Write(request, module_fds);
}

absl::Status WorkerProcess::SendMany(absl::Span<const FrameChannel::Outgoing> requests) {
  if (pid_ <= 0) return absl::UnavailableError("the worker is not running");
  return channel_.WriteMany(requests);
}

absl::StatusOr<kprof::worker::v1::WorkerAnswer> WorkerProcess::Receive() {
  if (pid_ <= 0) return absl::AbortedError("worker gone");
  kprof::worker::v1::WorkerAnswer response;
  std::vector<int> fds;
  if (const absl::Status read = channel_.Read(&response, &fds); !read.ok()) {
    // The worker closed its end (it died), or wrote what is no answer: either way it is done.
    return absl::AbortedError(absl::StrCat(
        "worker ", Ended(absl::IsUnavailable(read) ? Reap(absl::Seconds(1)) : KillAndReap())));
  }
  if (response.has_arguments()) {
    // The checked call's arguments: read out of the worker's sealed file here, so that the
    // comparison never runs where the function can reach.
    absl::Status read = fds.size() == 1
                            ? ReadArgumentFile(fds[0], &response)
                            : absl::DataLossError("its arguments came without their file");
    if (!read.ok()) {
      response.clear_arguments();
      response.clear_result();
      response.set_code(wire::ToWireCode(absl::StatusCode::kInternal));
      response.set_message(absl::StrCat("the worker's answer is unreadable: ", read.message()));
    }
  }
  for (int fd : fds) close(fd);
  for (const std::string& id : response.closed_modules()) {
    recent_modules_.erase(std::remove(recent_modules_.begin(), recent_modules_.end(), id),
                          recent_modules_.end());
  }
  response.clear_closed_modules();
  if (!response.host_environment().empty()) {
    host_environment_ = std::move(*response.mutable_host_environment());
    response.clear_host_environment();
  }
  if (response.has_time_evaluate() && !host_environment_.empty()) {
    // The host's part joins the result's environment as a second occurrence of `environment`
    // after the job's part: a message field that occurs twice on the wire is merged by every
    // reader.
    AppendField(kprof::v1::TimeEvaluateResponse::kEnvironmentFieldNumber, host_environment_,
                response.mutable_time_evaluate());
  }
  return response;
}

bool WorkerProcess::HoldsModulesOf(const kprof::worker::v1::WorkerRequest& request) const {
  return std::all_of(request.modules().begin(), request.modules().end(), [this](const auto& file) {
    return std::find(recent_modules_.begin(), recent_modules_.end(), file.id()) !=
           recent_modules_.end();
  });
}

void WorkerProcess::HandedOn(const kprof::worker::v1::WorkerRequest& request) {
  // The worker closes the least recently used beyond kMaxOpenModules; those of the last
  // kMaxOpenModules / 2 jobs' modules stay open however the jobs between interleave.
  constexpr size_t kKept = kMaxOpenModules / 2;
  for (const auto& file : request.modules()) {
    recent_modules_.erase(std::remove(recent_modules_.begin(), recent_modules_.end(), file.id()),
                          recent_modules_.end());
    recent_modules_.push_front(file.id());
  }
  while (recent_modules_.size() > kKept) recent_modules_.pop_back();
}

absl::StatusOr<kprof::worker::v1::WorkerAnswer> WorkerProcess::Run(
    const kprof::worker::v1::WorkerRequest& request, absl::Duration timeout,
    absl::Span<const int> module_fds) {
  if (pid_ <= 0) return absl::InternalError("the worker is not running");
  if (absl::Status s = Send(request, module_fds); !s.ok()) {
    return absl::AbortedError(absl::StrCat("worker ", Ended(Reap(absl::Seconds(1)))));
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Status ready = channel_.WaitReadable(deadline - absl::Now());
    if (absl::IsDeadlineExceeded(ready)) {
      KillAndReap();
      return absl::DeadlineExceededError("the job ran past its deadline; its worker was killed");
    }
    absl::StatusOr<kprof::worker::v1::WorkerAnswer> response = Receive();
    if (!response.ok() || response->job_id() == request.job_id()) return response;
    // An answer to an earlier job (abandoned after a deadline would have killed it, so this
    // cannot happen with one job at a time); skip it.
  }
}

DescribedHost DescribeHost(WorkerOptions options, absl::Duration timeout) {
  options.device = {base::DeviceType::kCpu, 0};
  options.max_data_bytes = 0;  // the CUDA driver reserves address space as it initialises
  options.placement = {};      // the daemon's CPUs, at the daemon's priority
  options.describer = true;
  const absl::Time deadline = absl::Now() + timeout;
  DescribedHost described;
  std::unique_ptr<WorkerProcess> worker;
  uint64_t job_id = 0;
  const auto ask = [&](bool cuda) -> absl::Status {
    const char* const part = cuda ? "the GPUs" : "the CPU";
    if (worker == nullptr || !worker->alive()) {
      absl::StatusOr<std::unique_ptr<WorkerProcess>> spawned = WorkerProcess::Spawn(options);
      if (!spawned.ok()) return spawned.status();
      worker = *std::move(spawned);
    }
    kprof::worker::v1::WorkerRequest request;
    request.set_job_id(++job_id);
    request.mutable_describe()->set_cuda(cuda);
    absl::StatusOr<kprof::worker::v1::WorkerAnswer> response =
        worker->Run(request, std::max(deadline - absl::Now(), absl::Milliseconds(100)));
    if (absl::IsDeadlineExceeded(response.status())) {
      return absl::DeadlineExceededError(
          cuda ? absl::StrCat("the CUDA driver did not answer within ",
                              absl::FormatDuration(timeout),
                              " (--describe-timeout; cuInit or NVML hung: a GPU in a bad state?); "
                              "restart kprofd to look again")
               : absl::StrCat("the worker did not describe the CPU within ",
                              absl::FormatDuration(timeout), " (--describe-timeout)"));
    }
    if (!response.ok()) {
      return absl::Status(
          response.status().code(),
          absl::StrCat("the worker describing ", part, ": ", response.status().message()));
    }
    if (const absl::Status failed = wire::StatusFromWire(response->code(), response->message());
        !failed.ok()) {
      return absl::Status(failed.code(),
                          absl::StrCat("the worker describing ", part, ": ", failed.message()));
    }
    described.host.MergeFrom(response->host());
    return absl::OkStatus();
  };
  described.cpu = ask(false);
  described.cuda = ask(true);
  return described;
}

}  // namespace kprof::server

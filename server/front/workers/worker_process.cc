#include "server/front/workers/worker_process.h"

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
#include "base/status_macros.h"
#include "proto/status.h"
#include "server/ipc/argument_data.h"
#include "server/ipc/wire.h"
#include "server/worker/worker_job.h"

extern char** environ;

namespace kprof::server {
namespace {

constexpr int kChildSocket = 3;
constexpr int kChildOutput = 4;  // the write end of its output pipe, when the daemon reads it

// A pipe of `output`'s for a worker: its key there, and its write end at descriptor 10 or above
// (clear of the child's 3 and 4, which the spawn's dup2s fill).
absl::StatusOr<std::pair<int, int>> OutputPipe(WorkerOutput& output) {
  KPROF_ASSIGN_OR_RETURN(auto ends, output.Open(""));
  const int write_end = fcntl(ends.second, F_DUPFD_CLOEXEC, 10);
  close(ends.second);
  if (write_end < 0) {
    output.Close(ends.first);
    return absl::InternalError(absl::StrCat("a worker's output pipe: ", std::strerror(errno)));
  }
  return std::make_pair(ends.first, write_end);
}

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

namespace {

// The worker's scratch directory beneath options.scratch_root, made its user's ("" for none).
absl::StatusOr<std::string> MakeScratch(const WorkerOptions& options) {
  if (options.scratch_root.empty()) return std::string();
  std::string name = options.scratch_root + "/worker-XXXXXX";
  if (mkdtemp(name.data()) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot make the worker's scratch directory in ", options.scratch_root, ": ",
                     std::strerror(errno)));
  }
  if (options.user.has_value() && chown(name.c_str(), options.user->uid, options.user->gid) != 0) {
    const int error = errno;
    RemoveTree(name);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot give the worker's scratch directory to uid ", options.user->uid, ": ",
                     std::strerror(error)));
  }
  return name;
}

// The daemon's environment, with TMPDIR naming the scratch directory (the one place it may
// write).
std::vector<std::string> WorkerEnvironment(const std::string& scratch) {
  std::vector<std::string> environment;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!scratch.empty() && std::strncmp(*e, "TMPDIR=", 7) == 0) continue;
    environment.emplace_back(*e);
  }
  if (!scratch.empty()) environment.push_back("TMPDIR=" + scratch);
  return environment;
}

// The worker's command line.
std::vector<std::string> WorkerArguments(const WorkerOptions& options, const std::string& scratch,
                                         bool redirect_output) {
  std::vector<std::string> args = {options.executable,
                                   "--device",
                                   base::DeviceSpec(options.device),
                                   "--max-frame-bytes",
                                   std::to_string(options.max_frame_bytes),
                                   "--max-data-bytes",
                                   std::to_string(options.max_data_bytes),
                                   "--open-modules",
                                   std::to_string(options.max_open_modules),
                                   "--parent-pid",
                                   std::to_string(getpid())};
  for (const std::string& p : options.unreadable) args.insert(args.end(), {"--no-read", p});
  if (!scratch.empty()) args.insert(args.end(), {"--scratch", scratch});
  if (options.user.has_value())
    args.insert(args.end(), {"--user", FormatWorkerUser(*options.user)});
  if (options.describer) args.push_back("--describer");
  if (options.busy_poll > absl::ZeroDuration()) {
    args.insert(args.end(),
                {"--busy-poll-us", std::to_string(absl::ToInt64Microseconds(options.busy_poll))});
  }
  if (!options.placement.cpus.empty()) {
    args.insert(args.end(), {"--cpus", core::FormatCpuList(options.placement.cpus)});
  }
  if (const std::string priority = core::FormatPriority(options.placement.priority);
      !priority.empty()) {
    args.insert(args.end(), {"--priority", priority});
  }
  if (redirect_output) args.push_back("--redirect-output");
  return args;
}

// `strings` as the null-terminated array exec takes (pointing into them).
std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// posix_spawn of a worker: its job socket as descriptor 3 and its output pipe's write end as 1
// and 2 (by way of 4), in its own process group (so that everything it starts can be killed),
// no signals blocked (the daemon blocks its own for a signal thread), default dispositions.
int SpawnWorker(pid_t* pid, int socket, int output, std::vector<std::string> args,
                std::vector<std::string> environment) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, socket, kChildSocket);
  if (output >= 0) posix_spawn_file_actions_adddup2(&actions, output, kChildOutput);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const std::vector<char*> argv = Pointers(args), envp = Pointers(environment);
  const int error = posix_spawn(pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  return error;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Spawn(const WorkerOptions& options) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  // The child's end away from 3 and 4, which the spawn's dup2s fill (a dup2 onto itself would
  // keep close-on-exec set).
  const int child = fcntl(sockets[1], F_DUPFD_CLOEXEC, 10);
  close(sockets[1]);
  absl::StatusOr<std::string> made_scratch = MakeScratch(options);
  absl::Status failed = made_scratch.status();
  const std::string scratch = made_scratch.ok() ? *std::move(made_scratch) : std::string();
  std::unique_ptr<WorkerCgroups::Box> box;
  if (failed.ok() && options.cgroups != nullptr) {
    absl::StatusOr<std::unique_ptr<WorkerCgroups::Box>> made = options.cgroups->NewBox();
    if (made.ok()) box = *std::move(made);
    if (!made.ok()) {
      failed = absl::FailedPreconditionError(
          absl::StrCat("cannot make the worker's memory cgroup: ", made.status().message()));
    }
  }
  std::pair<int, int> output{-1, -1};  // its key, and the write end
  if (failed.ok() && options.output != nullptr) {
    absl::StatusOr<std::pair<int, int>> pipe = OutputPipe(*options.output);
    if (pipe.ok()) output = *pipe;
    failed.Update(pipe.status());
  }
  pid_t pid = 0;
  if (const int error = failed.ok()
                            ? SpawnWorker(&pid, child, output.second,
                                          WorkerArguments(options, scratch, output.first >= 0),
                                          WorkerEnvironment(scratch))
                            : 0;
      error != 0) {
    failed = absl::FailedPreconditionError(
        absl::StrCat("cannot start the worker '", options.executable, "': ", std::strerror(error)));
  }
  close(child);
  if (output.second >= 0) close(output.second);
  if (!failed.ok()) {
    if (output.first >= 0) options.output->Close(output.first);
    close(sockets[0]);
    if (!scratch.empty()) RemoveTree(scratch);
    return failed;
  }
  std::unique_ptr<WorkerProcess> worker(
      new WorkerProcess(pid, sockets[0], options.max_frame_bytes, scratch, std::move(box),
                        options.cgroups != nullptr ? options.cgroups->limit_bytes() : 0));
  if (output.first >= 0) {
    worker->output_ = options.output;
    worker->output_key_ = output.first;
    options.output->Label(output.first,
                          absl::StrCat(base::DeviceSpec(options.device), " worker ", pid));
  }
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
  if (output_ != nullptr) output_->Close(output_key_);
  // The worker is gone and could start no process: nothing writes here any more.
  if (!scratch_.empty() && !RemoveTree(scratch_)) {
    base::Log(base::LogSeverity::kWarning,
              absl::StrCat("cannot remove the worker's scratch directory ", scratch_));
  }
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
  absl::MutexLock lock(&send_mutex_);
  return channel_.Write(request, module_fds);
}

namespace {

const kprof::worker::v1::WorkerRequest& YieldRequest() {
  static const kprof::worker::v1::WorkerRequest* const yield = [] {
    auto* request = new kprof::worker::v1::WorkerRequest;
    request->mutable_yield();
    return request;
  }();
  return *yield;
}

}  // namespace

absl::Status WorkerProcess::SendMany(absl::Span<const FrameChannel::Outgoing> requests) {
  if (pid_ <= 0) return absl::UnavailableError("the worker is not running");
  absl::MutexLock lock(&send_mutex_);
  absl::Status sent = channel_.WriteMany(requests);
  if (sent.ok() && yield_wanted_.exchange(false)) (void)channel_.TryWriteSmall(YieldRequest());
  return sent;
}

bool WorkerProcess::TryYield() {
  // Never waits: with a send under way (jobs being handed on), the yield goes right after it.
  if (!send_mutex_.TryLock()) {
    yield_wanted_.store(true);
    return true;
  }
  const bool sent = channel_.TryWriteSmall(YieldRequest());
  send_mutex_.Unlock();
  return sent;
}

absl::StatusOr<kprof::worker::v1::WorkerAnswer> WorkerProcess::Receive() {
  if (pid_ <= 0) return absl::AbortedError("worker gone");
  kprof::worker::v1::WorkerAnswer response;
  std::vector<int> fds;
  if (const absl::Status read = channel_.Read(&response, &fds); !read.ok()) {
    // The worker closed its end (it died), or wrote what is no answer: either way it is done.
    const std::string how =
        Ended(absl::IsUnavailable(read) ? Reap(absl::Seconds(1)) : KillAndReap());
    return absl::AbortedError(absl::StrCat("worker ", how, OutputEnding()));
  }
  if (output_ != nullptr) AttachOutput(output_->Take(output_key_), &response);
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

// kprofd-worker: runs jobs for one device on behalf of kprofd. Started by the daemon (never by
// hand) with the job socket as descriptor 3; it reads a request, runs it, answers, and repeats
// until the socket closes. It dies with the daemon (PR_SET_PDEATHSIG).
#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/device.h"
#include "base/read_file.h"
#include "core/cuda/cuda_backend.h"
#include "core/host/environment.h"
#include "core/host/placement.h"
#include "kprof/config.h"
#include "proto/status.h"
#include "server/ipc/frame_channel.h"
#include "server/worker/clock_helper.h"
#include "server/worker/job_leftovers.h"
#include "server/worker/worker_job.h"
#include "server/worker/worker_sandbox.h"

namespace {

constexpr int kJobSocket = 3;

// A function that crashes must end the worker by that very signal, so the daemon can name it —
// even in builds whose sanitizers install handlers of their own, and even when the crash is a
// stack overflow (hence the alternate stack).
void InstallCrashHandlers() {
  static char alternate_stack[1 << 16];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof alternate_stack;
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = [](int sig) {
    signal(sig, SIG_DFL);
    raise(sig);
  };
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &action, nullptr);
}

// The job socket's neighbour: the write end of the pipe of the worker's output, when kprofd
// reads it (--redirect-output).
constexpr int kOutputFd = 4;

// Makes the output pipe the worker's standard output and error, line-buffered, and closes every
// other way to the daemon's own standard error.
void RedirectOutput() {
  std::fflush(nullptr);
  dup2(kOutputFd, STDOUT_FILENO);
  dup2(kOutputFd, STDERR_FILENO);
  close(kOutputFd);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
}

// A data-size limit (heap, anonymous mappings) so that a job asking for absurd memory fails
// inside the worker rather than waking the host's OOM killer. Not RLIMIT_AS, which would
// break CUDA's address reservations; not under AddressSanitizer, whose shadow memory counts.
void LimitData(uint64_t bytes) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)bytes;
#else
  if (bytes == 0) return;
  const rlimit limit{bytes, bytes};
  if (setrlimit(RLIMIT_DATA, &limit) != 0) {
    std::fprintf(stderr, "kprofd-worker: cannot limit data size: %s\n", std::strerror(errno));
  }
#endif
}

// Why the CUDA context of `device` is lost (a kernel faulted), or "" when it is not. Threads
// the driver starts are its own, so a CUDA worker counts them into its baseline after init.
std::string ContextLost(kprof::base::Device device) {
  if (device.type != kprof::base::DeviceType::kCuda) return "";
  return kprof::core::CudaContextLost(device.id);
}

#if defined(__SANITIZE_ADDRESS__)
// LeakSanitizer's exit-time check stops the process with ptrace from a clone() without
// CLONE_THREAD, both of which the syscall filter denies: the worker's leaks go unchecked in
// sanitizer builds (the code it runs is leak-checked in the unit tests, outside a worker).
extern "C" int __lsan_is_turned_off() { return 1; }
#endif

constexpr long long kMaxBusyPollUs = 1000000;

// Waits up to `ns` for a frame by asking the socket again and again, giving the CPU to whatever
// else may run on it between asks: the next job of a client that sends one after another comes
// without the wake-up of a sleeping process, which costs tens of microseconds on a VM. Whether
// a frame (or the end of the stream) is there.
bool BusyPoll(kprof::server::FrameChannel& channel, int64_t ns) {
  const int64_t until = absl::GetCurrentTimeNanos() + ns;
  while (!channel.Poll()) {
    if (absl::GetCurrentTimeNanos() >= until) return false;
    sched_yield();
  }
  return true;
}

int Usage(const char* why) {
  std::fprintf(stderr,
               "kprofd-worker: %s\nusage: kprofd-worker --device cpu:0 --max-frame-bytes N "
               "[--busy-poll-us N] (started by kprofd with its job socket as descriptor 3)\n",
               why);
  return 2;
}

// What the daemon starts a worker with (its command line).
struct WorkerFlags {
  std::string device_text;
  size_t max_frame_bytes = 64 << 20;
  uint64_t max_data_bytes = 0;
  uint64_t max_open_modules = kprof::server::kMaxOpenModules;
  pid_t parent = 0;
  kprof::server::SandboxPaths sandbox;
  kprof::core::Placement placement;
  std::optional<kprof::server::WorkerUser> user;
  bool describer = false;
  bool redirect_output = false;
  int64_t busy_poll_ns = 0;
};

// Reads the command line into `flags`: -1 to go on, or the exit status (usage, --help).
int ParseFlags(int argc, char** argv, WorkerFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    const bool value = i + 1 < argc;
    if (std::strcmp(argv[i], "--device") == 0 && value) {
      flags->device_text = argv[++i];
    } else if (std::strcmp(argv[i], "--max-frame-bytes") == 0 && value) {
      flags->max_frame_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--no-read") == 0 && value) {
      flags->sandbox.unreadable.emplace_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--user") == 0 && value) {
      absl::StatusOr<kprof::server::WorkerUser> parsed = kprof::server::ParseWorkerUser(argv[++i]);
      if (!parsed.ok()) return Usage(std::string(parsed.status().message()).c_str());
      flags->user = *std::move(parsed);
    } else if (std::strcmp(argv[i], "--busy-poll-us") == 0 && value) {
      char* end = nullptr;
      const long long us = std::strtoll(argv[++i], &end, 10);
      if (end == argv[i] || *end != 0 || us < 0 || us > kMaxBusyPollUs) {
        return Usage("--busy-poll-us wants microseconds from 0 to 1000000");
      }
      flags->busy_poll_ns = us * 1000;
    } else if (std::strcmp(argv[i], "--describer") == 0) {
      flags->describer = true;
    } else if (std::strcmp(argv[i], "--redirect-output") == 0) {
      flags->redirect_output = true;
    } else if (std::strcmp(argv[i], "--scratch") == 0 && value) {
      flags->sandbox.scratch = argv[++i];
    } else if (std::strcmp(argv[i], "--parent-pid") == 0 && value) {
      flags->parent = static_cast<pid_t>(std::strtol(argv[++i], nullptr, 10));
    } else if (std::strcmp(argv[i], "--max-data-bytes") == 0 && value) {
      flags->max_data_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--open-modules") == 0 && value) {
      flags->max_open_modules = std::strtoull(argv[++i], nullptr, 10);
      if (flags->max_open_modules == 0) return Usage("--open-modules wants a positive count");
    } else if (std::strcmp(argv[i], "--cpus") == 0 && value) {
      absl::StatusOr<std::vector<int>> cpus = kprof::core::ParseCpuList(argv[++i]);
      if (!cpus.ok()) return Usage(std::string(cpus.status().message()).c_str());
      flags->placement.cpus = *std::move(cpus);
    } else if (std::strcmp(argv[i], "--priority") == 0 && value) {
      absl::StatusOr<kprof::core::Priority> priority = kprof::core::ParsePriority(argv[++i]);
      if (!priority.ok()) return Usage(std::string(priority.status().message()).c_str());
      flags->placement.priority = *priority;
    } else if (std::strcmp(argv[i], "--help") == 0) {
      Usage("runs measurement jobs for kprofd");
      return 0;
    } else {
      return Usage("unknown argument");
    }
  }
  return -1;
}

// How the worker is confined, for each job's answer: the parts in place, and whether all are.
struct Isolation {
  std::vector<std::string> parts;
  bool complete = true;
};

// Confines the worker before it takes a job, in this order: death with the daemon, crash
// handlers, placement, the data limit, Landlock, the CUDA driver's start, the worker's own
// user, capabilities, and last the syscall filter (everything before may do what it denies).
// -1 to go on, or the exit status.
int Confine(const WorkerFlags& flags, kprof::base::Device device, Isolation* isolation) {
  // Die with the daemon; if it is already gone, do not linger.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (flags.parent > 0 && getppid() != flags.parent) return 1;  // it died before the prctl
  InstallCrashHandlers();
  // Still one thread: pinning and priority hold for the whole worker and what it starts.
  if (const absl::Status s = kprof::core::ApplyPlacement(flags.placement); !s.ok()) {
    std::fprintf(stderr, "kprofd-worker: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  // Not for a GPU's worker: the driver maps device memory and its own bookkeeping into the
  // process, and device allocations are bounded by the argument limit anyway.
  if (device.type == kprof::base::DeviceType::kCpu) LimitData(flags.max_data_bytes);
  if (absl::StatusOr<std::string> s = kprof::server::ApplyWorkerSandbox(flags.sandbox); s.ok()) {
    isolation->parts.push_back(*std::move(s));
  } else {
    isolation->parts.push_back(absl::StrCat("no Landlock (", s.status().message(), ")"));
    isolation->complete = false;
    std::fprintf(stderr, "kprofd-worker: running without its Landlock sandbox: %s\n",
                 s.status().ToString().c_str());
  }
  // The driver starts threads of its own as it initialises; they are part of a CUDA worker's
  // baseline, not a disturbance left by a job. A device that fails here fails each job with
  // the reason.
  if (device.type == kprof::base::DeviceType::kCuda) (void)kprof::core::StartCudaWorker(device.id);
  // A root daemon's worker becomes a user of its own: files only root may read (/etc/shadow,
  // /root) are out of reach, on top of the Landlock rules. Its CUDA device, opened above, stays
  // open.
  if (flags.user.has_value()) {
    if (flags.describer) kprof::core::PreloadCudaDriver();
    kprof::server::DropBoundingSet();  // while the capability to do so is still there
    if (const absl::Status s = kprof::server::BecomeUser(*flags.user, flags.parent); !s.ok()) {
      std::fprintf(stderr, "kprofd-worker: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    isolation->parts.push_back(absl::StrCat("uid ", flags.user->uid));
  }
  if (const absl::Status s = kprof::server::DropCapabilities(); !s.ok()) {
    isolation->parts.push_back(absl::StrCat("capabilities kept (", s.message(), ")"));
    isolation->complete = false;
  }
  if (const absl::Status s = kprof::server::ApplyWorkerSyscallFilter(); s.ok()) {
    isolation->parts.push_back("seccomp filter");
    kprof::core::PlacementIsFixed();  // the filter denies changing CPUs and priority
  } else {
    isolation->parts.push_back(absl::StrCat("no seccomp filter (", s.message(), ")"));
    isolation->complete = false;
    std::fprintf(stderr, "kprofd-worker: running without its syscall filter: %s\n",
                 s.ToString().c_str());
  }
  return -1;
}

// The jobs, one after another, until the daemon closes the socket: each read with whatever came
// behind it (withdrawals included) before it starts, run, checked for what it left behind, and
// answered.
class JobLoop {
 public:
  JobLoop(kprof::base::Device device, const WorkerFlags& flags, const Isolation& isolation)
      : device_(device),
        skip_cuda_(device.type == kprof::base::DeviceType::kCuda),
        baseline_threads_(kprof::server::CountThreads(skip_cuda_)),
        job_socket_(kprof::server::IdentityOf(kJobSocket)),
        scratch_(flags.sandbox.scratch),
        busy_poll_ns_(flags.busy_poll_ns),
        channel_(kJobSocket, flags.max_frame_bytes),
        jobs_(device, flags.max_open_modules) {
    jobs_.set_isolation(absl::StrJoin(isolation.parts, "; "), isolation.complete);
  }

  // The worker's exit status.
  int Run() {
    while (true) {
      if (pending_.empty()) {
        if (std::exchange(answered_, false) && busy_poll_ns_ > 0) {
          BusyPoll(channel_, busy_poll_ns_);
        }
        kprof::worker::v1::WorkerRequest request;
        std::vector<int> fds;
        const absl::Status read = channel_.Read(&request, &fds);
        if (absl::IsUnavailable(read)) return 0;  // the daemon closed the socket: done
        if (!read.ok()) {
          std::fprintf(stderr, "kprofd-worker: %s\n", read.ToString().c_str());
          return 1;
        }
        if (!TakeIn(std::move(request), std::move(fds))) return 0;
      }
      if (const int status = TakeInWhatCame(); status >= 0) return status;
      if (channel_.ended()) return 0;  // the daemon is done with this worker
      if (pending_.empty()) continue;
      Pending next = std::move(pending_.front());
      pending_.pop_front();
      if (const int status = RunJob(next.request, next.fds); status >= 0) return status;
    }
  }

 private:
  // A job handed on and not started yet.
  struct Pending {
    kprof::worker::v1::WorkerRequest request;
    std::vector<int> fds;
  };

  // A frame from the daemon: a job to queue, a Park (stop the busy poll), a Withdraw or a Yield
  // (jobs taken back, each answered as withdrawn). Whether the socket still works.
  bool TakeIn(kprof::worker::v1::WorkerRequest request, std::vector<int> fds) {
    if (request.has_park()) {
      for (int fd : fds) close(fd);
      answered_ = false;
      return true;
    }
    if (!request.has_withdraw() && !request.has_yield()) {
      pending_.push_back(Pending{std::move(request), std::move(fds)});
      return true;
    }
    std::vector<uint64_t> ids;
    if (request.has_yield()) {
      // Another client waits: the next job stays, every one behind it goes back.
      for (size_t i = 1; i < pending_.size(); ++i) ids.push_back(pending_[i].request.job_id());
    } else {
      ids.assign(request.withdraw().job_ids().begin(), request.withdraw().job_ids().end());
    }
    for (const uint64_t id : ids) {
      const auto it = std::find_if(pending_.begin(), pending_.end(),
                                   [id](const Pending& p) { return p.request.job_id() == id; });
      if (it == pending_.end()) continue;  // started already, or answered
      for (int fd : it->fds) close(fd);
      pending_.erase(it);
      kprof::worker::v1::WorkerResponse withdrawn;
      withdrawn.set_job_id(id);
      withdrawn.set_withdrawn(true);
      if (!channel_.Write(withdrawn).ok()) return false;
    }
    return true;
  }

  // Everything that has come, before a job starts. Asked of the socket even right after a
  // blocking read: a recvmsg stops at a frame that carries descriptors, so the frames behind a
  // job's may still be there. -1 to go on, or the exit status.
  int TakeInWhatCame() {
    while (true) {
      kprof::worker::v1::WorkerRequest request;
      std::vector<int> fds;
      absl::Status read;
      if (!channel_.TryRead(&request, &fds, &read)) {
        if (!read.ok() && !absl::IsUnavailable(read)) {
          std::fprintf(stderr, "kprofd-worker: %s\n", read.ToString().c_str());
          return 1;
        }
        return -1;
      }
      if (!TakeIn(std::move(request), std::move(fds))) return 0;
    }
  }

  // Runs one job and answers it: -1 to go on, or the exit status (after an answer that cannot
  // be written or one that asks for a fresh worker, 0; when the job socket was replaced, 1).
  int RunJob(const kprof::worker::v1::WorkerRequest& request, const std::vector<int>& fds) {
    if (request.deadline_unix_ns() != 0 &&
        absl::ToUnixNanos(absl::Now()) >= request.deadline_unix_ns()) {
      for (int fd : fds) close(fd);
      kprof::worker::v1::WorkerResponse late;
      late.set_job_id(request.job_id());
      late.set_code(kprof::wire::ToWireCode(absl::StatusCode::kDeadlineExceeded));
      late.set_message("the request's deadline passed while the job waited");
      return channel_.Write(late).ok() ? -1 : 0;
    }
    kprof::worker::v1::WorkerResponse response = jobs_.Run(request, fds);
    for (int fd : fds) close(fd);
    const int argument_fd = jobs_.TakeArgumentFile();  // with the answer, unless replaced
    if (!(kprof::server::IdentityOf(kJobSocket) == job_socket_)) {
      // Nothing can be said on the socket any more: the daemon sees the worker end and fails
      // the job; the next one gets a fresh worker.
      std::fprintf(stderr, "kprofd-worker: %s replaced the job socket; exiting\n",
                   kprof::server::WorkerJobs::Describe(request).c_str());
      return 1;
    }
    JudgeWhatItLeft(request, &response);
    std::fflush(nullptr);  // what the job printed is in the pipe before its answer is sent
    const bool with_arguments = argument_fd >= 0 && response.has_arguments();
    const absl::Status written =
        with_arguments ? channel_.Write(response, {&argument_fd, 1}) : channel_.Write(response);
    if (argument_fd >= 0) close(argument_fd);
    if (!written.ok() || response.recycle()) return 0;
    answered_ = true;
    return -1;
  }

  // A job that lost the device's context or left something behind (threads, files, a changed
  // process) fails, and its worker is replaced.
  void JudgeWhatItLeft(const kprof::worker::v1::WorkerRequest& request,
                       kprof::worker::v1::WorkerResponse* response) {
    if (request.has_describe()) {
      // The daemon's one-off question at start, on a worker it discards afterwards: the
      // driver threads and NVML a CUDA description leaves behind are no job's leftovers.
      return;
    }
    if (const std::string lost = ContextLost(device_); !lost.empty()) {
      // A kernel faulted: every later CUDA call in this process would fail the same way.
      response->Clear();
      response->set_job_id(request.job_id());
      response->set_code(kprof::wire::ToWireCode(absl::StatusCode::kAborted));
      response->set_message(kprof::server::WorkerJobs::Describe(request) + " failed on " +
                            kprof::base::DeviceSpec(device_) + ": " + lost +
                            "; the device's context cannot be used after this, so its worker "
                            "was replaced");
      response->set_recycle(true);
      return;
    }
    const std::string why = kprof::server::Disturbance(baseline_threads_, skip_cuda_, scratch_);
    if (why.empty()) return;
    // A job that failed on its own keeps its error (a strict check's is the finding), and says
    // what it left too.
    const std::string message = response->code() != 0
                                    ? response->message() + "; it also " + why
                                    : kprof::server::WorkerJobs::Describe(request) + " " + why;
    response->Clear();
    response->set_job_id(request.job_id());
    response->set_code(kprof::wire::ToWireCode(absl::StatusCode::kAborted));
    response->set_message(message + "; its worker was replaced");
    response->set_recycle(true);
    // A strict job's work that goes on after it is a failed check, whatever else it did.
    response->set_check_failed(request.strict());
  }

  const kprof::base::Device device_;
  const bool skip_cuda_;
  const int baseline_threads_;
  const kprof::server::FileIdentity job_socket_;
  const kprof::server::ScratchDirectory scratch_;
  const int64_t busy_poll_ns_;
  kprof::server::FrameChannel channel_;
  kprof::server::WorkerJobs jobs_;
  // Jobs handed on and not started yet, in order: everything that has arrived is read before
  // each job starts, so a job taken back (Withdraw) is answered without running.
  std::deque<Pending> pending_;
  // Right after an answer, the next job is waited for with a busy poll, until a Park says
  // another worker is to run.
  bool answered_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--clocks") == 0) {
    return kprof::server::RunClockHelper(argc, argv);
  }
  WorkerFlags flags;
  if (const int status = ParseFlags(argc, argv, &flags); status >= 0) return status;
  const absl::StatusOr<kprof::base::Device> device = kprof::base::ParseDevice(flags.device_text);
  if (!device.ok()) return Usage(std::string(device.status().message()).c_str());
  Isolation isolation;
  if (const int status = Confine(flags, *device, &isolation); status >= 0) return status;
  // From here on what reaches the standard streams (a module's printf, a failed assertion) is
  // the jobs' output: a pipe the daemon reads for the job's client, never the daemon's log.
  if (flags.redirect_output) RedirectOutput();
  JobLoop loop(*device, flags, isolation);
  return loop.Run();
}

// WorkerProcess: one kprofd-worker, spawned with posix_spawn (never a fork of the threaded
// daemon) in its own process group, with its job socket as descriptor 3 and every other
// descriptor closed on exec. It dies with the daemon.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/device.h"
#include "core/host/placement.h"
#include "server/front/scheduling/job_runner.h"
#include "server/front/workers/scratch_root.h"
#include "server/front/workers/worker_cgroup.h"
#include "server/front/workers/worker_output.h"
#include "server/ipc/frame_channel.h"
#include "server/ipc/worker.pb.h"
#include "server/worker/worker_sandbox.h"

namespace kprof::server {

struct WorkerOptions {
  std::string executable;  // path of kprofd-worker
  base::Device device;
  size_t max_frame_bytes = 64 << 20;
  uint64_t max_data_bytes = 0;     // RLIMIT_DATA of the worker; 0: none
  uint64_t max_open_modules = 64;  // modules kept loaded between jobs (WorkerJobs)
  core::Placement placement;       // CPUs and priority the worker gives itself
  // Landlock: paths the worker may not read (the token file, the TLS key, the cache) or write.
  std::vector<std::string> unreadable;
  // Where each worker gets a scratch directory of its own, its TMPDIR and the only place it may
  // write, removed with it. The daemon keeps it from every worker's reading. Empty: none.
  std::string scratch_root;
  // Who the worker becomes once set up (a root daemon's workers): its scratch directory is
  // made its own. None: the daemon's user.
  std::optional<WorkerUser> user;
  // A memory cgroup per worker (not owned); none: RLIMIT_DATA alone bounds it.
  WorkerCgroups* cgroups = nullptr;
  // The worker describes the host (DescribeHost): it loads the CUDA driver library before
  // becoming `user`, who may not reach the library (a driver under a private tree).
  bool describer = false;
  // How long a worker that has just answered waits for its next job with a busy poll, and the
  // front for a quick answer (DeviceExecutor); zero: they sleep until woken.
  absl::Duration busy_poll = absl::ZeroDuration();
  // Reads the worker's standard output and error (not owned): what its jobs print goes to their
  // clients (WorkerAnswer results' `output`, a crash's message). None: the daemon's own stderr.
  WorkerOutput* output = nullptr;
};

class WorkerProcess final : public JobRunner {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Spawn(const WorkerOptions& options);

  // Closes the socket (the worker exits on its own) and reaps it, killing its process group if
  // it does not exit within a second.
  ~WorkerProcess() override;
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends `request` and waits up to `timeout` for the answer to it. When the worker dies, the
  // result is ABORTED naming how ("killed by SIGSEGV", "exited with status 3"); when time runs
  // out, its process group is killed and the result is DEADLINE_EXCEEDED. In both cases the
  // worker is gone and alive() is false.
  // `module_fds`: the request's modules, opened by the front, passed along (still the caller's).
  absl::StatusOr<kprof::worker::v1::WorkerAnswer> Run(
      const kprof::worker::v1::WorkerRequest& request, absl::Duration timeout,
      absl::Span<const int> module_fds = {});

  // The pipelined form (DeviceExecutor): Send hands a job on without waiting, Receive takes the
  // next answer once fd() is readable or HasAnswer(). Send fails (UNAVAILABLE) when the worker
  // has closed its end; the answers it wrote before are still there to Receive. Receive is
  // ABORTED, naming how the worker ended, once it has ended and every answer is read; the
  // worker is reaped then. A TimeEvaluate result's environment is whole: the host's part the
  // worker sent once (WorkerResponse.host_environment) is added to each. The result stays the
  // bytes the worker wrote (WorkerAnswer).
  absl::Status Send(const kprof::worker::v1::WorkerRequest& request,
                    absl::Span<const int> module_fds = {});
  // Several jobs at once, in order, with one system call where their descriptors fit one.
  absl::Status SendMany(absl::Span<const FrameChannel::Outgoing> requests) override;
  bool TryYield() override;
  absl::StatusOr<kprof::worker::v1::WorkerAnswer> Receive() override;
  // Whether the worker has every module `request` names open: each is among the modules of
  // the jobs handed on last, whose files went to it (with one of them), and no answer since
  // said it was closed. Such a job can go without them. A worker that closed one all the same
  // sends the job back (WorkerRequest.module_files_withheld).
  bool HoldsModulesOf(const kprof::worker::v1::WorkerRequest& request) const override;
  // `request` was handed on, with its modules' files or without (HoldsModulesOf).
  void HandedOn(const kprof::worker::v1::WorkerRequest& request) override;
  bool HasAnswer() const override { return channel_.HasFrame(); }
  // Takes in what the worker has written, without blocking: whether Receive would not block.
  bool PollAnswer() override { return channel_.Poll(); }
  int fd() const override { return socket_; }
  // Kills the worker's process group and reaps it; returns how it ended.
  std::string Kill() override { return pid_ > 0 ? KillAndReap() : "gone"; }
  std::string OutputEnding() override {
    return output_ != nullptr ? server::OutputEnding(output_->Take(output_key_)) : "";
  }

  bool alive() const override { return pid_ > 0; }
  pid_t pid() const override { return pid_; }
  const std::string& scratch() const { return scratch_; }

 private:
  WorkerProcess(pid_t pid, int socket, size_t max_frame_bytes, std::string scratch,
                std::unique_ptr<WorkerCgroups::Box> box, uint64_t memory_limit)
      : pid_(pid),
        socket_(socket),
        channel_(socket, max_frame_bytes),
        scratch_(std::move(scratch)),
        box_(std::move(box)),
        memory_limit_(memory_limit) {}

  // How the worker ended, for messages: `how` ("killed by SIGKILL (Killed)"), and why when its
  // cgroup's OOM killer did it.
  std::string Ended(std::string how) const;

  // Kills the process group and reaps the worker; returns how it ended.
  std::string KillAndReap();
  // Reaps a worker that is exiting or has exited; returns how it ended.
  std::string Reap(absl::Duration grace);

  pid_t pid_;
  int socket_;
  FrameChannel channel_;
  absl::Mutex send_mutex_;  // one frame at a time onto the socket: TryYield comes from anywhere
  std::atomic<bool> yield_wanted_{false};    // asked while a send was under way: sent after it
  std::string host_environment_;             // serialised kprof.v1.MetricMap, the last sent
  std::deque<std::string> recent_modules_;   // of the last jobs handed on, the latest first
  std::string scratch_;                      // removed once the worker is reaped
  std::unique_ptr<WorkerCgroups::Box> box_;  // removed after the scratch
  uint64_t memory_limit_;
  WorkerOutput* output_ = nullptr;  // and the key of its pipe there
  int output_key_ = -1;
};

// "killed by SIGSEGV (Segmentation fault)", "exited with status 3".
std::string DescribeWaitStatus(int status);

// The host's description (server/worker/host_description.h), asked of a worker started for the
// purpose and ended after: the CPU part, then the CUDA part, both within `timeout` (past it the
// worker is killed: a cuInit can hang on a GPU in a bad state). A part that fails is missing
// from `host`, and `cpu` or `cuda` says why.
struct DescribedHost {
  kprof::worker::v1::HostDescription host;
  absl::Status cpu;
  absl::Status cuda;
};
DescribedHost DescribeHost(WorkerOptions options, absl::Duration timeout);

}  // namespace kprof::server

// JobRunner: what a DeviceExecutor hands its jobs to and reads their answers from. In kprofd it
// is a worker process (WorkerProcess); the executor's tests give it a stand-in that runs
// scripted jobs in a thread, so the scheduling is tested without processes, gRPC or a device.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/ipc/frame_channel.h"
#include "server/ipc/worker.pb.h"

namespace kprof::server {

class JobRunner {
 public:
  virtual ~JobRunner() = default;

  // Hands frames on in order without waiting: jobs, and the control frames (withdraw, park).
  // UNAVAILABLE once the runner has closed its end; the answers it wrote before are still
  // there to Receive.
  virtual absl::Status SendMany(absl::Span<const FrameChannel::Outgoing> frames) = 0;
  // From any thread, never blocking: asks the runner to keep the next of the jobs it holds and
  // hand back the others (a Yield frame), at once or right after a send under way. False when
  // it cannot go (a full socket); the executor's own Withdraw follows either way.
  virtual bool TryYield() { return false; }
  // The next answer, blocking; not ok once the runner has ended and every answer is read,
  // naming how it ended.
  virtual absl::StatusOr<kprof::worker::v1::WorkerAnswer> Receive() = 0;
  // Whether Receive would not block (HasAnswer: from what was taken in; PollAnswer takes in
  // what is there without blocking first).
  virtual bool HasAnswer() const = 0;
  virtual bool PollAnswer() = 0;
  // Readable when an answer (or the end) is there to Receive.
  virtual int fd() const = 0;
  // Stops the runner at once, whatever it runs; how it ended.
  virtual std::string Kill() = 0;
  // "; its output ended: ..." with what the worker printed last since its last answer, or "".
  virtual std::string OutputEnding() { return ""; }
  virtual bool alive() const = 0;
  // The process (group) that runs the jobs; -1 when there is none to signal.
  virtual pid_t pid() const = 0;
  // Whether a job may go without its modules' descriptors (the runner has them open), and the
  // note that a job went (WorkerProcess::HoldsModulesOf).
  virtual bool HoldsModulesOf(const kprof::worker::v1::WorkerRequest& request) const = 0;
  virtual void HandedOn(const kprof::worker::v1::WorkerRequest& request) = 0;
};

// Starts a runner for one client's jobs (the executor keeps one per client).
using RunnerFactory = std::function<absl::StatusOr<std::unique_ptr<JobRunner>>()>;

}  // namespace kprof::server

// DeviceExecutor: the jobs of one device, one at a time, run by worker processes of that
// device. Each client (ProfilerService::Authenticate) has a worker of its own: no check can see
// every change a function makes inside its process (a patched timer, a hooked clock_gettime),
// so one client's job never runs in a process another client's code has run in. Only one job
// runs at a time, so measurements never overlap; the queue takes the clients in turn, a job
// each. Workers start on their client's first job and stay for the next, up to
// `max_workers` per device (past it, the one idle longest is stopped) and for `idle_timeout`
// without a job. A bounded queue: past `max_queue` waiting jobs of one client, Submit refuses
// that client's next at once.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kprof/v1/worker.pb.h"
#include "server/worker_process.h"

namespace kprof::server {

struct JobTiming {
  absl::Duration queue_wait;
  absl::Duration execution;
};

// The worker processes of one device.
struct WorkerPool {
  int max_workers = 4;                             // one per client
  absl::Duration idle_timeout = absl::Minutes(5);  // a worker without a job this long ends
};

class DeviceExecutor {
 public:
  // The result of a job (a worker response whose code may be an error, or a failure of the
  // worker itself) and how long it waited and ran. Called on the executor's thread.
  using Done = std::function<void(absl::StatusOr<kprof::worker::v1::WorkerResponse>, JobTiming)>;

  DeviceExecutor(WorkerOptions worker, int max_queue, absl::Duration job_timeout,
                 WorkerPool pool = WorkerPool());
  ~DeviceExecutor();  // Drain()

  // Queues a job that must finish by `deadline` (its execution is also capped by the job
  // timeout). `keep_alive` is held until `done` has run (pinned modules, say). `started`, when
  // set, runs on the executor's thread as the job leaves the queue for the worker.
  // `beyond_bound` queues the job even when the queue is full: for callers that bound their
  // own jobs in the queue (a batch stream holds a few).
  // RESOURCE_EXHAUSTED when the queue is full; UNAVAILABLE once draining.
  // `module_fds`, the request's modules opened for the worker, stay open as long as
  // `keep_alive` (which owns them) lives.
  absl::Status Submit(kprof::worker::v1::WorkerRequest request, std::string client,
                      absl::Time deadline, Done done, std::shared_ptr<void> keep_alive,
                      std::function<void()> started = nullptr, bool beyond_bound = false,
                      std::vector<int> module_fds = {}) ABSL_LOCKS_EXCLUDED(mutex_);

  // Takes job `job_id` out of the queue (its Done gets CANCELLED), or stops it if it runs (its
  // worker is killed and its result dropped; Done gets CANCELLED). No-op for unknown jobs.
  void Cancel(uint64_t job_id) ABSL_LOCKS_EXCLUDED(mutex_);

  // Refuses new jobs, answers queued ones UNAVAILABLE, lets the running one finish for up to
  // `grace` (then kills it), stops the worker. Idempotent.
  void Drain(absl::Duration grace = absl::Seconds(10)) ABSL_LOCKS_EXCLUDED(mutex_);

  struct Stats {
    int queue_length = 0;
    bool busy = false;
    int64_t completed = 0;
    int64_t failed = 0;
    int workers = 0;  // running now, one per client
    int64_t workers_started = 0;
  };
  Stats stats() ABSL_LOCKS_EXCLUDED(mutex_);

  const core::Device& device() const { return worker_options_.device; }

 private:
  struct Job {
    kprof::worker::v1::WorkerRequest request;
    std::string client;
    absl::Time deadline;
    absl::Time enqueued;
    Done done;
    std::shared_ptr<void> keep_alive;
    std::function<void()> started;
    std::vector<int> module_fds;  // owned by keep_alive
  };

  struct Worker {
    std::unique_ptr<WorkerProcess> process;
    absl::Time last_job;
  };

  void Loop();
  absl::StatusOr<kprof::worker::v1::WorkerResponse> Execute(const Job& job);
  // The worker of `client`, started if need be (stopping the one idle longest at the bound).
  absl::StatusOr<WorkerProcess*> WorkerFor(const std::string& client);
  void RetireIdleWorkers();
  void KillRunningWorker() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // The next job, clients in turn.
  Job TakeNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const WorkerOptions worker_options_;
  const int max_queue_;
  const absl::Duration job_timeout_;
  const WorkerPool pool_;
  std::map<std::string, Worker> workers_;  // by client; used by the executor thread only

  absl::Mutex mutex_;
  std::map<std::string, std::deque<Job>> queues_ ABSL_GUARDED_BY(mutex_);  // by client
  std::deque<std::string> turns_ ABSL_GUARDED_BY(mutex_);  // clients with jobs, next first
  int queued_ ABSL_GUARDED_BY(mutex_) = 0;
  int workers_running_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t workers_started_ ABSL_GUARDED_BY(mutex_) = 0;
  bool draining_ ABSL_GUARDED_BY(mutex_) = false;
  bool busy_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;  // the loop has ended
  uint64_t running_job_ ABSL_GUARDED_BY(mutex_) = 0;
  pid_t running_pid_ ABSL_GUARDED_BY(mutex_) = -1;
  bool running_cancelled_ ABSL_GUARDED_BY(mutex_) = false;
  int64_t completed_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mutex_) = 0;
  std::thread thread_;
};

}  // namespace kprof::server

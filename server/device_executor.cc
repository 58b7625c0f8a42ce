#include "server/device_executor.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "server/module_registry.h"

namespace kprof::server {

DeviceExecutor::DeviceExecutor(WorkerOptions worker, int max_queue, absl::Duration job_timeout,
                               WorkerPool pool)
    : worker_options_(std::move(worker)),
      max_queue_(max_queue),
      job_timeout_(job_timeout),
      pool_(pool) {
  thread_ = std::thread([this] { Loop(); });
}

DeviceExecutor::~DeviceExecutor() { Drain(); }

absl::Status DeviceExecutor::Submit(kprof::worker::v1::WorkerRequest request, std::string client,
                                    absl::Time deadline, Done done,
                                    std::shared_ptr<void> keep_alive, std::function<void()> started,
                                    bool beyond_bound, std::vector<int> module_fds) {
  absl::MutexLock lock(&mutex_);
  if (draining_) return absl::UnavailableError("kprofd is shutting down and takes no new jobs");
  // The bound is each client's: one client's flood never fills the queue for the others.
  const auto mine = queues_.find(client);
  const int waiting = mine == queues_.end() ? 0 : static_cast<int>(mine->second.size());
  if (!beyond_bound && waiting >= max_queue_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the queue of ", core::DeviceSpec(worker_options_.device), " is full (",
                     waiting, " jobs waiting, limit ", max_queue_, " per client); retry later"));
  }
  std::deque<Job>& queue = queues_[client];
  if (queue.empty()) turns_.push_back(client);
  queue.push_back(Job{std::move(request), std::move(client), deadline, absl::Now(), std::move(done),
                      std::move(keep_alive), std::move(started), std::move(module_fds)});
  ++queued_;
  return absl::OkStatus();
}

DeviceExecutor::Job DeviceExecutor::TakeNext() {
  const std::string client = std::move(turns_.front());
  turns_.pop_front();
  std::deque<Job>& queue = queues_[client];
  Job job = std::move(queue.front());
  queue.pop_front();
  --queued_;
  if (queue.empty()) {
    queues_.erase(client);
  } else {
    turns_.push_back(client);  // its next job after every other client's next
  }
  return job;
}

void DeviceExecutor::Cancel(uint64_t job_id) {
  Done done;
  {
    absl::MutexLock lock(&mutex_);
    if (running_job_ == job_id && busy_) {
      running_cancelled_ = true;
      KillRunningWorker();
      return;
    }
    for (auto q = queues_.begin(); q != queues_.end() && !done; ++q) {
      std::deque<Job>& queue = q->second;
      const auto it = std::find_if(queue.begin(), queue.end(), [job_id](const Job& job) {
        return job.request.job_id() == job_id;
      });
      if (it == queue.end()) continue;
      done = std::move(it->done);
      queue.erase(it);
      --queued_;
      if (queue.empty()) {
        turns_.erase(std::find(turns_.begin(), turns_.end(), q->first));
        queues_.erase(q);
      }
      break;  // q is gone
    }
  }
  if (done) done(absl::CancelledError("the client cancelled; the job left the queue"), {});
}

void DeviceExecutor::KillRunningWorker() {
  if (running_pid_ > 0) kill(-running_pid_, SIGKILL);
}

void DeviceExecutor::Drain(absl::Duration grace) {
  std::deque<Job> refused;
  {
    absl::MutexLock lock(&mutex_);
    draining_ = true;
    while (!turns_.empty()) refused.push_back(TakeNext());
  }
  for (Job& job : refused) {
    job.done(absl::UnavailableError("kprofd is shutting down; the job did not start"), {});
  }
  {
    absl::MutexLock lock(&mutex_);
    const auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return finished_; };
    if (!mutex_.AwaitWithTimeout(absl::Condition(&ended), grace)) {
      core::Log(core::LogSeverity::kWarning,
                absl::StrCat("the job on ", core::DeviceSpec(worker_options_.device),
                             " did not finish within the shutdown grace; killing it"));
      KillRunningWorker();
    }
  }
  if (thread_.joinable()) thread_.join();
}

DeviceExecutor::Stats DeviceExecutor::stats() {
  absl::MutexLock lock(&mutex_);
  return Stats{queued_, busy_, completed_, failed_, workers_running_, workers_started_};
}

absl::StatusOr<WorkerProcess*> DeviceExecutor::WorkerFor(const std::string& client) {
  auto it = workers_.find(client);
  if (it != workers_.end() && it->second.process->alive()) return it->second.process.get();
  if (it != workers_.end()) {
    workers_.erase(it);  // died or was stopped: a fresh one below
  } else if (static_cast<int>(workers_.size()) >= pool_.max_workers) {
    auto idlest = workers_.begin();
    for (auto w = workers_.begin(); w != workers_.end(); ++w) {
      if (w->second.last_job < idlest->second.last_job) idlest = w;
    }
    workers_.erase(idlest);
  }
  auto spawned = WorkerProcess::Spawn(worker_options_);
  {
    absl::MutexLock lock(&mutex_);
    workers_running_ = static_cast<int>(workers_.size()) + (spawned.ok() ? 1 : 0);
    if (spawned.ok()) ++workers_started_;
  }
  if (!spawned.ok()) return spawned.status();
  Worker& worker = workers_[client];
  worker.process = *std::move(spawned);
  worker.last_job = absl::Now();
  return worker.process.get();
}

void DeviceExecutor::RetireIdleWorkers() {
  const absl::Time now = absl::Now();
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (now - it->second.last_job >= pool_.idle_timeout || !it->second.process->alive()) {
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  absl::MutexLock lock(&mutex_);
  workers_running_ = static_cast<int>(workers_.size());
}

absl::StatusOr<kprof::worker::v1::WorkerResponse> DeviceExecutor::Execute(const Job& job) {
  if (job.deadline <= absl::Now()) {
    return absl::DeadlineExceededError("the request's deadline passed while the job waited");
  }
  absl::StatusOr<WorkerProcess*> found = WorkerFor(job.client);
  if (!found.ok()) return found.status();
  WorkerProcess* worker = *found;
  const absl::Duration left = job.deadline - absl::Now();  // after a worker's start, if any
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError("the request's deadline passed while its worker started");
  }
  const absl::Duration timeout = std::min(left, job_timeout_);
  {
    absl::MutexLock lock(&mutex_);
    if (running_cancelled_) {  // cancelled while the worker was starting
      return absl::CancelledError("the client cancelled; the job did not start");
    }
    running_pid_ = worker->pid();
  }
  auto response = worker->Run(job.request, timeout, job.module_fds);
  workers_[job.client].last_job = absl::Now();
  bool cancelled = false;
  {
    absl::MutexLock lock(&mutex_);
    running_pid_ = -1;
    cancelled = running_cancelled_;
  }
  // A worker that is disturbed (it says so), stopped or dead is replaced at its client's next
  // job.
  const auto end_worker = [&] {
    workers_.erase(job.client);
    absl::MutexLock lock(&mutex_);
    workers_running_ = static_cast<int>(workers_.size());
  };
  if (cancelled) {
    end_worker();
    return absl::CancelledError("the client cancelled; the running job was stopped");
  }
  if (response.ok() && response->recycle()) end_worker();
  if (!response.ok() && !worker->alive()) {
    end_worker();
    if (absl::IsDeadlineExceeded(response.status())) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the job ran ", absl::FormatDuration(timeout),
          timeout == job_timeout_ ? " (the daemon's --job-timeout)" : " (the request's deadline)",
          " and was stopped; its worker was restarted"));
    }
    core::Log(core::LogSeverity::kWarning, absl::StrCat(core::DeviceSpec(worker_options_.device),
                                                        ": ", response.status().message()));
  }
  return response;
}

void DeviceExecutor::Loop() {
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mutex_);
      const absl::Condition work(
          +[](DeviceExecutor* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
            return !self->turns_.empty() || self->draining_;
          },
          this);
      // Idle: wake now and then to end the workers whose clients have gone quiet.
      while (!mutex_.AwaitWithTimeout(work, std::min(pool_.idle_timeout, absl::Seconds(10)))) {
        mutex_.Unlock();
        RetireIdleWorkers();
        mutex_.Lock();
      }
      if (turns_.empty()) break;  // draining and nothing left
      job = TakeNext();
      busy_ = true;
      running_job_ = job.request.job_id();
      running_cancelled_ = false;
    }
    if (job.started) job.started();
    const absl::Time started = absl::Now();
    absl::StatusOr<kprof::worker::v1::WorkerResponse> result = Execute(job);
    const JobTiming timing{started - job.enqueued, absl::Now() - started};
    const bool ok = result.ok() && result->code() == 0;
    {
      // Counted before the answer goes out: a client that asks GetInfo right after its answer
      // must see its job counted.
      absl::MutexLock lock(&mutex_);
      busy_ = false;
      (ok ? completed_ : failed_) += 1;
    }
    job.keep_alive.reset();  // modules unpinned before the answer, too
    job.done(std::move(result), timing);
  }
  workers_.clear();
  absl::MutexLock lock(&mutex_);
  workers_running_ = 0;
  finished_ = true;
}

}  // namespace kprof::server

#include "server/device_executor.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace kprof::server {

DeviceExecutor::DeviceExecutor(WorkerOptions worker, int max_queue, absl::Duration job_timeout)
    : worker_options_(std::move(worker)), max_queue_(max_queue), job_timeout_(job_timeout) {
  thread_ = std::thread([this] { Loop(); });
}

DeviceExecutor::~DeviceExecutor() { Drain(); }

absl::Status DeviceExecutor::Submit(kprof::worker::v1::WorkerRequest request, absl::Time deadline,
                                    Done done, std::shared_ptr<void> keep_alive,
                                    std::function<void()> started, bool beyond_bound) {
  absl::MutexLock lock(&mutex_);
  if (draining_) return absl::UnavailableError("kprofd is shutting down and takes no new jobs");
  if (!beyond_bound && static_cast<int>(queue_.size()) >= max_queue_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the queue of ", core::DeviceSpec(worker_options_.device), " is full (",
                     queue_.size(), " jobs waiting, limit ", max_queue_, "); retry later"));
  }
  queue_.push_back(Job{std::move(request), deadline, absl::Now(), std::move(done),
                       std::move(keep_alive), std::move(started)});
  return absl::OkStatus();
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
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->request.job_id() == job_id) {
        done = std::move(it->done);
        queue_.erase(it);
        break;
      }
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
    refused.swap(queue_);
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
  return Stats{static_cast<int>(queue_.size()), busy_, completed_, failed_};
}

absl::StatusOr<kprof::worker::v1::WorkerResponse> DeviceExecutor::Execute(const Job& job) {
  const absl::Duration left = job.deadline - absl::Now();
  if (left <= absl::ZeroDuration()) {
    return absl::DeadlineExceededError("the request's deadline passed while the job waited");
  }
  if (worker_ == nullptr || !worker_->alive()) {
    auto spawned = WorkerProcess::Spawn(worker_options_);
    if (!spawned.ok()) return spawned.status();
    worker_ = *std::move(spawned);
  }
  const absl::Duration timeout = std::min(left, job_timeout_);
  {
    absl::MutexLock lock(&mutex_);
    if (running_cancelled_) {  // cancelled while the worker was starting
      return absl::CancelledError("the client cancelled; the job did not start");
    }
    running_pid_ = worker_->pid();
  }
  auto response = worker_->Run(job.request, timeout);
  bool cancelled = false;
  {
    absl::MutexLock lock(&mutex_);
    running_pid_ = -1;
    cancelled = running_cancelled_;
  }
  if (cancelled) {
    worker_.reset();
    return absl::CancelledError("the client cancelled; the running job was stopped");
  }
  if (response.ok() && response->recycle()) worker_.reset();  // disturbed: start afresh
  if (!response.ok() && !worker_->alive()) {
    worker_.reset();
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
      mutex_.Await(absl::Condition(
          +[](DeviceExecutor* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mutex_) {
            return !self->queue_.empty() || self->draining_;
          },
          this));
      if (queue_.empty()) break;  // draining and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
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
  worker_.reset();
  absl::MutexLock lock(&mutex_);
  finished_ = true;
}

}  // namespace kprof::server

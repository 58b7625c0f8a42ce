#include "absl/synchronization/mutex.h"
#include "server/front/scheduling/device_executor.h"

// The executor's workers: one per client, started at its first job, replaced when it dies, ended
// when idle too long or when a new client needs the place of the one idle longest. Only the
// executor's loop calls these.
namespace kprof::server {

absl::StatusOr<JobRunner*> DeviceExecutor::WorkerFor(const std::string& client) {
  auto it = workers_.find(client);
  if (it != workers_.end() && it->second.process->alive()) return it->second.process.get();
  std::string cause = "new";
  if (const auto lost = restart_cause_.find(client); lost != restart_cause_.end()) {
    cause = std::move(lost->second);
    restart_cause_.erase(lost);
  }
  if (it != workers_.end()) {
    if (cause == "new") cause = "crash";  // it died between jobs
    workers_.erase(it);                   // died or was stopped: a fresh one below
  } else if (static_cast<int>(workers_.size()) >= pool_.max_workers) {
    auto idlest = workers_.begin();
    for (auto w = workers_.begin(); w != workers_.end(); ++w) {
      if (w->second.last_job < idlest->second.last_job) idlest = w;
    }
    workers_.erase(idlest);
  }
  absl::StatusOr<std::unique_ptr<JobRunner>> spawned = runners_();
  {
    absl::MutexLock lock(&mutex_);
    workers_running_ = static_cast<int>(workers_.size()) + (spawned.ok() ? 1 : 0);
    if (spawned.ok()) ++workers_started_;
  }
  if (!spawned.ok()) return spawned.status();
  if (metrics_ != nullptr) metrics_->WorkerStarted(worker_options_.device, cause);
  Worker& worker = workers_[client];
  worker.process = *std::move(spawned);
  worker.last_job = absl::Now();
  return worker.process.get();
}

void DeviceExecutor::EndWorker(const std::string& client) {
  const auto it = workers_.find(client);
  {
    absl::MutexLock lock(&mutex_);
    if (it != workers_.end() && yield_to_ == it->second.process.get()) yield_to_ = nullptr;
  }
  if (it != workers_.end()) workers_.erase(it);
  absl::MutexLock lock(&mutex_);
  workers_running_ = static_cast<int>(workers_.size());
}

void DeviceExecutor::RetireIdleWorkers() {
  const absl::Time now = absl::Now();
  for (auto it = workers_.begin(); it != workers_.end();) {
    const bool active = it->second.process.get() == active_;
    if (!active &&
        (now - it->second.last_job >= pool_.idle_timeout || !it->second.process->alive())) {
      restart_cause_.erase(it->first);  // its next worker starts anew
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  absl::MutexLock lock(&mutex_);
  workers_running_ = static_cast<int>(workers_.size());
}

}  // namespace kprof::server

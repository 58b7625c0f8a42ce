#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "server/front/scheduling/device_executor.h"

// The executor's loop: the thread that owns the workers, hands them jobs as NextPipelineStep
// says, reads their answers, and stops what runs past its time.
namespace kprof::server {

using kprof::worker::v1::WorkerAnswer;
using kprof::worker::v1::WorkerRequest;

void DeviceExecutor::FrontStarted(absl::Time at) {
  front_since_ = at;
  if (in_flight_.empty()) return;
  Job& front = in_flight_.front();
  if (front.cancelled || front.taking_back || !front.started) return;
  std::function<void()> started = std::move(front.started);
  front.started = nullptr;
  started();
}

void DeviceExecutor::Hand(std::vector<Job> jobs) {
  HandOn(std::move(jobs));
  Account();  // whatever became of them
}

void DeviceExecutor::HandOn(std::vector<Job> jobs) {
  std::vector<Job> live;
  const absl::Time now = absl::Now();
  for (Job& job : jobs) {
    if (job.deadline <= now) {
      Deliver(job,
              absl::DeadlineExceededError("the request's deadline passed while the job waited"),
              now, now);
    } else {
      live.push_back(std::move(job));
    }
  }
  if (live.empty()) return;
  if (active_ == nullptr) {
    ParkLastServed(live.front().client);
    active_client_ = live.front().client;  // one client's, as Refill takes them
    absl::StatusOr<JobRunner*> found = WorkerFor(active_client_);
    if (!found.ok()) {
      for (Job& job : live) Deliver(job, found.status(), now, now);
      return;
    }
    active_ = *found;
    active_broken_ = false;
    absl::MutexLock lock(&mutex_);
    running_pid_ = active_->pid();
  }
  std::vector<FrameChannel::Outgoing> frames;
  frames.reserve(live.size());
  for (Job& job : live) frames.push_back(Frame(job, *active_));
  // Stamped before the send: a job cannot begin before it, and a thread preempted after it would
  // otherwise stamp a job that has already run most of its time.
  const absl::Time sending = absl::Now();
  const absl::Status sent = active_->SendMany(frames);
  if (!sent.ok() && !absl::IsUnavailable(sent)) {
    // A frame the channel refuses (over the size cap, too many descriptors) is refused before
    // anything is sent, and the worker is fine: one at a time, each job meets its own fate.
    if (live.size() == 1) {
      Deliver(live.front(), sent, now, now);
      return;
    }
    for (Job& job : live) {
      std::vector<Job> one;
      one.push_back(std::move(job));
      HandOn(std::move(one));
    }
    return;
  }
  if (!sent.ok()) {
    active_broken_ = true;
    size_t requeue_from = 0;
    if (in_flight_.empty()) {
      // It died with nothing to do (killed from outside, a start that failed): the first job
      // is told how, rather than handed to a worker that may die the same way again and again.
      const absl::StatusOr<WorkerAnswer> ended = active_->Receive();
      const absl::Time at = absl::Now();
      Deliver(live.front(),
              ended.ok() ? absl::AbortedError("worker closed its socket") : ended.status(), at, at);
      requeue_from = 1;
    }
    // It closed its end: what it answered before is still to be read, then its end is seen.
    for (size_t i = requeue_from; i < live.size(); ++i) Requeue(std::move(live[i]));
    return;
  }
  const bool first = in_flight_.empty();
  for (Job& job : live) {
    if (!job.module_fds.empty()) active_->HandedOn(job.request);
    in_flight_.push_back(std::move(job));
  }
  if (first) FrontStarted(sending);
}

std::vector<uint64_t> DeviceExecutor::MarkTakenBack(size_t first) {
  std::vector<uint64_t> ids;
  for (size_t i = first; i < in_flight_.size(); ++i) {
    Job& job = in_flight_[i];
    if (job.cancelled || job.taking_back) continue;
    job.taking_back = true;
    ids.push_back(job.request.job_id());
  }
  return ids;
}

PipelineView DeviceExecutor::View() const {
  PipelineView view;
  view.has_worker = active_ != nullptr;
  view.worker_broken = active_broken_;
  view.draining = draining_;
  view.depth = static_cast<size_t>(std::max(pool_.pipeline_depth, 1));
  view.handed_on_live.reserve(in_flight_.size());
  for (const Job& job : in_flight_)
    view.handed_on_live.push_back(!job.cancelled && !job.taking_back);
  // Under a lease the holder alone has turns: another client's pipeline makes way at once.
  const bool gated = lease_.has_value() && !draining_;
  view.leased_away = gated && view.has_worker && !Admitted(active_client_);
  view.own_queued =
      view.has_worker && !view.leased_away ? static_cast<size_t>(turns_.Queued(active_client_)) : 0;
  // ... but for its reference runs, which its leased jobs' checks wait for.
  view.others_queued = gated ? turns_.HasJobs(ReferenceKey(lease_->holder)) &&
                                   active_client_ != ReferenceKey(lease_->holder)
                             : turns_.OthersWaiting(active_client_);
  view.any_queued = gated ? lease_->open && (turns_.HasJobs(LeaseKey(lease_->holder)) ||
                                             turns_.HasJobs(ReferenceKey(lease_->holder)))
                          : !turns_.empty();
  return view;
}

void DeviceExecutor::Refill() {
  while (true) {
    std::vector<Job> jobs;
    {
      absl::MutexLock lock(&mutex_);
      const PipelineStep step = NextPipelineStep(View());
      switch (step.kind) {
        case PipelineStep::kWait:
          return;
        case PipelineStep::kRelease:
          // The pipeline is empty: the next client may have the device (a broken worker is
          // replaced at its client's next job).
          if (active_broken_) {
            mutex_.Unlock();
            EndWorker(active_client_);
            mutex_.Lock();
          }
          active_ = nullptr;
          running_pid_ = -1;
          yield_to_ = nullptr;
          continue;
        case PipelineStep::kStart:
          // The first job goes on alone, so that the worker starts on it at once.
          jobs.push_back(TakeNext(active_client_));
          in_flight_ids_.insert(jobs.back().request.job_id());  // a Cancel now goes to the loop
          break;
        case PipelineStep::kFill:
          for (size_t i = 0; i < step.count; ++i) {
            jobs.push_back(TakeNext(active_client_));  // the only client with a turn
            in_flight_ids_.insert(jobs.back().request.job_id());
            // Counted against the client's bound from now, not from when they are sent.
            handed_waiting_bounded_ += !jobs.back().beyond_bound;
          }
          break;
        case PipelineStep::kTakeBack: {
          const std::vector<uint64_t> ids = MarkTakenBack(step.count);
          mutex_.Unlock();
          Withdraw(ids);
          mutex_.Lock();
          return;
        }
      }
    }
    Hand(std::move(jobs));
  }
}

void DeviceExecutor::LoseWorker(const absl::Status* front, std::string_view cause) {
  restart_cause_[active_client_] = std::string(cause);
  std::deque<Job> jobs;
  jobs.swap(in_flight_);
  {
    // Each job's id leaves in_flight_ids_ as it is answered or queued again (Deliver, Requeue):
    // a Cancel meanwhile still reaches the loop.
    absl::MutexLock lock(&mutex_);
    handed_on_ = 0;
    handed_waiting_bounded_ = 0;
    running_pid_ = -1;
    yield_to_ = nullptr;
  }
  const absl::Time now = absl::Now();
  EndWorker(active_client_);
  active_ = nullptr;
  // Its replacement starts now, while the answer goes out: a client whose candidate crashed
  // sends the next one at once, and a worker takes some 15 ms to be ready.
  bool draining = false;
  {
    absl::MutexLock lock(&mutex_);
    draining = draining_;
  }
  // Not at the bound, where it would stop another client's idle worker for one that may not
  // be wanted.
  if (!draining && static_cast<int>(workers_.size()) < pool_.max_workers) {
    (void)WorkerFor(active_client_);
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    Job& job = jobs[i];
    if (job.cancelled) continue;  // answered already
    if (i == 0 && front != nullptr) {
      Deliver(job, *front, front_since_, now);
    } else {
      Requeue(std::move(job));  // never failed for the crash of the job before it
    }
  }
}

void DeviceExecutor::Answer(absl::StatusOr<WorkerAnswer> answer) {
  const absl::Time now = absl::Now();
  if (!answer.ok()) {  // the worker ended
    const std::string message(answer.status().message());
    base::LogFields fields = {{"DEVICE", base::DeviceSpec(worker_options_.device)},
                              {"CLIENT", KeyName(active_client_)},
                              {"CODE", absl::StatusCodeToString(answer.status().code())}};
    if (!in_flight_.empty()) {
      fields.push_back({"JOB_ID", absl::StrCat(in_flight_.front().request.job_id())});
    }
    base::Log(base::LogSeverity::kWarning,
              absl::StrCat(base::DeviceSpec(worker_options_.device), ": ", message), fields);
    LoseWorker(&answer.status(), "crash");
    return;
  }
  const uint64_t id = answer->job_id();
  const auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                               [id](const Job& job) { return job.request.job_id() == id; });
  if (it == in_flight_.end()) return;  // no job of this worker's (a forged id): dropped
  const bool front = it == in_flight_.begin();
  Job job = std::move(*it);
  in_flight_.erase(it);
  Account();
  workers_[active_client_].last_job = now;
  last_answer_ = now;
  const absl::Time started = front_since_;
  if (answer->recycle()) {
    // Disturbed: it exits after this answer, without reading the jobs behind it, which are
    // queued again. It is gone (its scratch directory too) before the answer goes out.
    LoseWorker(nullptr, "recycle");
  } else if (front) {
    FrontStarted(now);  // the worker goes straight into the next
  }
  if (answer->withdrawn()) {
    if (!job.cancelled) Requeue(std::move(job));
  } else if (!job.cancelled) {
    if (job.started) job.started();  // it ran though taken back: it began all the same
    Deliver(job, std::move(answer), started, now);
  } else {
    absl::MutexLock lock(&mutex_);
    in_flight_ids_.erase(id);
  }
}

void DeviceExecutor::HandleCancels(std::vector<uint64_t> ids) {
  std::vector<uint64_t> withdraw;
  for (const uint64_t id : ids) {
    const auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                                 [id](const Job& job) { return job.request.job_id() == id; });
    if (it == in_flight_.end()) {
      // Taken back into the queue meanwhile, or answered.
      Done done;
      {
        absl::MutexLock lock(&mutex_);
        done = TakeFromQueue(id);
      }
      if (done) done(absl::CancelledError("the client cancelled; the job left the queue"), {});
      continue;
    }
    if (it->cancelled) continue;
    if (it == in_flight_.begin()) {
      // Running: only stopping the worker stops it. The jobs behind it run on a fresh one.
      it->cancelled = true;
      Deliver(*it, absl::CancelledError("the client cancelled; the running job was stopped"),
              front_since_, absl::Now());
      active_->Kill();
      LoseWorker(nullptr, "cancel");  // it is answered; the ones behind it are queued again
      continue;
    }
    it->cancelled = true;
    Deliver(*it, absl::CancelledError("the client cancelled; the job left the queue"), absl::Now(),
            absl::Now());
    if (!it->taking_back) withdraw.push_back(id);
  }
  Withdraw(withdraw);
  Account();
}

void DeviceExecutor::Withdraw(const std::vector<uint64_t>& ids) {
  if (ids.empty() || active_ == nullptr) return;
  WorkerRequest request;
  for (uint64_t id : ids) request.mutable_withdraw()->add_job_ids(id);
  const FrameChannel::Outgoing frame{&request, {}};
  if (!active_->SendMany({&frame, 1}).ok()) active_broken_ = true;
}

void DeviceExecutor::Account() {
  int handed_on = 0, waiting_bounded = 0;
  for (size_t i = 0; i < in_flight_.size(); ++i) {
    const Job& job = in_flight_[i];
    handed_on += !job.cancelled;
    waiting_bounded += i > 0 && !job.cancelled && !job.beyond_bound;
  }
  absl::MutexLock lock(&mutex_);
  if (handed_on > 0 && (handed_on_ == 0 || handed_client_ != active_client_)) {
    handed_since_ = absl::Now();
  }
  handed_on_ = handed_on;
  handed_waiting_bounded_ = waiting_bounded;
  handed_client_ = active_client_;
  yield_to_ = active_broken_ ? nullptr : active_;
}

void DeviceExecutor::ExpireHandedOn(absl::Time now) {
  std::vector<uint64_t> ids;
  for (size_t i = 1; i < in_flight_.size(); ++i) {
    Job& job = in_flight_[i];
    if (job.cancelled || job.deadline > now) continue;
    job.cancelled = true;
    Deliver(job, absl::DeadlineExceededError("the request's deadline passed while the job waited"),
            now, now);
    if (!job.taking_back) ids.push_back(job.request.job_id());
  }
  Withdraw(ids);
  Account();
}

absl::Time DeviceExecutor::FrontLimit() const {
  const Job& front = in_flight_.front();
  // Answered already (cancelled, or expired while handed on): its worker was told to skip it,
  // and gets a moment to say so, or to end it if it had begun.
  if (front.cancelled) return front_since_ + absl::Milliseconds(100);
  return std::min(front.deadline, front_since_ + job_timeout_);
}

bool DeviceExecutor::RunDeferred() {
  if (deferred_.empty()) return false;
  std::vector<std::function<void()>> deferred;
  deferred.swap(deferred_);
  for (auto& fn : deferred) fn();
  return true;
}

absl::Time DeviceExecutor::WakeAt(absl::Time idle_check, absl::Time now) const {
  if (active_ == nullptr || in_flight_.empty()) return std::max(idle_check, now);
  absl::Time until = FrontLimit();
  for (size_t i = 1; i < in_flight_.size(); ++i) {
    if (!in_flight_[i].cancelled) until = std::min(until, in_flight_[i].deadline);
  }
  return until;
}

bool DeviceExecutor::ReadyToSleep() {
  absl::MutexLock lock(&mutex_);
  if (!cancels_.empty() || (draining_ && turns_.empty() && in_flight_.empty())) return false;
  // Work that came while Refill ran: a job to hand on, or another client's that the jobs handed
  // on beyond the next must make way for.
  if (NextPipelineStep(View()).kind != PipelineStep::kWait) return false;
  // A lease gate set meanwhile whose device is clear already: its `clear` runs first.
  if (lease_clear_ && (in_flight_.empty() || Admitted(active_client_))) return false;
  sleeping_ = true;
  if (in_flight_.empty() && worker_options_.busy_poll > absl::ZeroDuration()) {
    const auto last = workers_.find(active_client_);
    if (last != workers_.end() && last->second.process->alive()) {
      quick_worker_ = &last->second;
      quick_client_ = active_client_;
    }
  }
  return true;
}

DeviceExecutor::Woken DeviceExecutor::Sleep(absl::Time until, absl::Time now) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {-1, POLLIN, 0}};
  if (active_ != nullptr && !in_flight_.empty()) fds[1].fd = active_->fd();
  const absl::Duration left = until - now;
  const int ms =
      wake_fd_ < 0 ? 10
      : left <= absl::ZeroDuration()
          ? 0
          : static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
  const int ready = poll(fds, 2, ms);
  std::optional<Handover> handover;
  {
    // A job on the quick path has the workers until it is answered or handed over.
    mutex_.LockWhen(absl::Condition(
        +[](bool* busy) { return !*busy; }, &quick_busy_));
    sleeping_ = false;
    quick_worker_ = nullptr;
    handover.swap(handover_);
    mutex_.Unlock();
  }
  if (ready > 0 && (fds[0].revents & POLLIN) != 0) {
    uint64_t count = 0;
    (void)!read(wake_fd_, &count, sizeof count);
  }
  if (handover.has_value()) {
    Adopt(*std::move(handover));
    return Woken::kHandedOver;
  }
  if (ready > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) return Woken::kAnswer;
  return Woken::kOther;
}

void DeviceExecutor::StopOverdueFront(absl::Time after) {
  const Job& front = in_flight_.front();
  if (after < FrontLimit() || active_->HasAnswer()) return;
  const bool by_job_timeout = front_since_ + job_timeout_ <= front.deadline;
  const absl::Duration ran = after - front_since_;
  active_->Kill();
  absl::Status stopped = absl::DeadlineExceededError(
      absl::StrCat("the job ran ", absl::FormatDuration(by_job_timeout ? job_timeout_ : ran),
                   by_job_timeout ? " (the daemon's --job-timeout)" : " (the request's deadline)",
                   " and was stopped; its worker was restarted"));
  base::Log(base::LogSeverity::kWarning,
            absl::StrCat(base::DeviceSpec(worker_options_.device), ": job ", front.request.job_id(),
                         " of ", active_client_, ": ", stopped.message()),
            {{"JOB_ID", absl::StrCat(front.request.job_id())},
             {"DEVICE", base::DeviceSpec(worker_options_.device)},
             {"CLIENT", KeyName(active_client_)},
             {"CODE", "DEADLINE_EXCEEDED"}});
  // What it printed last, for its client (not the log): where a hung kernel was.
  stopped = absl::DeadlineExceededError(absl::StrCat(stopped.message(), active_->OutputEnding()));
  LoseWorker(&stopped, "timeout");
}

void DeviceExecutor::Loop() {
  absl::Time idle_check = absl::Now();
  while (true) {
    std::vector<uint64_t> cancels;
    {
      absl::MutexLock lock(&mutex_);
      cancels.swap(cancels_);
      if (draining_ && turns_.empty() && in_flight_.empty() && cancels.empty()) break;
    }
    if (!cancels.empty()) HandleCancels(std::move(cancels));
    Refill();
    CheckLeaseClear();
    if (active_ != nullptr && !in_flight_.empty() && active_->HasAnswer()) {
      Answer(active_->Receive());
      continue;
    }
    // Nothing more to do at once: what the answers so far asked to run after them.
    if (RunDeferred()) continue;
    // Wait for an answer, new work, a cancel, the front job's time to run out, or (idle) the
    // time to end the workers whose clients have gone quiet.
    const absl::Time now = absl::Now();
    if (!ReadyToSleep()) continue;
    const Woken woken = Sleep(WakeAt(idle_check, now), now);
    if (woken == Woken::kHandedOver) continue;
    if (woken == Woken::kAnswer) {
      Answer(active_->Receive());
      continue;
    }
    const absl::Time after = absl::Now();
    if (active_ != nullptr && !in_flight_.empty()) ExpireHandedOn(after);
    if (active_ != nullptr && !in_flight_.empty()) {
      StopOverdueFront(after);
    } else if (after >= idle_check) {
      RetireIdleWorkers();
      idle_check = after + std::min(pool_.idle_timeout, absl::Seconds(10));
    }
  }
  in_flight_.clear();
  active_ = nullptr;
  {
    absl::MutexLock lock(&mutex_);
    yield_to_ = nullptr;
  }
  workers_.clear();
  while (RunDeferred()) {
  }
  absl::MutexLock lock(&mutex_);
  workers_running_ = 0;
  running_pid_ = -1;
  finished_ = true;
}

}  // namespace kprof::server

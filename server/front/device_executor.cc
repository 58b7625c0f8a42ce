#include "server/front/device_executor.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "server/front/module_registry.h"

namespace kprof::server {

using kprof::worker::v1::WorkerAnswer;
using kprof::worker::v1::WorkerRequest;

DeviceExecutor::DeviceExecutor(WorkerOptions worker, int max_queue, absl::Duration job_timeout,
                               WorkerPool pool, RunnerFactory runners)
    : worker_options_(std::move(worker)),
      max_queue_(max_queue),
      job_timeout_(job_timeout),
      pool_(pool),
      runners_(runners != nullptr
                   ? std::move(runners)
                   : [options = worker_options_]() -> absl::StatusOr<std::unique_ptr<JobRunner>> {
        KPROF_ASSIGN_OR_RETURN(std::unique_ptr<WorkerProcess> process,
                               WorkerProcess::Spawn(options));
        return process;
      }) {
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) {
    base::Log(base::LogSeverity::kError,
              absl::StrCat("eventfd: ", std::strerror(errno), "; the executor polls instead"));
  }
  thread_ = std::thread([this] { Loop(); });
}

DeviceExecutor::~DeviceExecutor() {
  Drain();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void DeviceExecutor::Defer(std::function<void()> fn) { deferred_.push_back(std::move(fn)); }

void DeviceExecutor::Wake() {
  if (wake_fd_ < 0) return;
  const uint64_t one = 1;
  while (write(wake_fd_, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

absl::Status DeviceExecutor::Submit(WorkerRequest request, std::string client, absl::Time deadline,
                                    Done done, std::shared_ptr<void> keep_alive,
                                    std::function<void()> started, bool beyond_bound,
                                    std::vector<int> module_fds) {
  bool wake = false;
  Job quick;
  Worker* quick_worker = nullptr;
  {
    absl::MutexLock lock(&mutex_);
    if (draining_) return absl::UnavailableError("kprofd is shutting down and takes no new jobs");
    // The bound is each client's: one client's flood never fills the queue for the others.
    // Jobs handed to its worker behind the running one wait too; those queued beyond the bound
    // (a batch stream's, which bounds its own) do not count.
    const int waiting =
        (handed_client_ == client ? handed_waiting_bounded_ : 0) + turns_.Bounded(client);
    if (!beyond_bound && waiting >= max_queue_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the queue of ", base::DeviceSpec(worker_options_.device), " is full (",
                       waiting, " jobs waiting, limit ", max_queue_, " per client); retry later"));
    }
    Job job;
    job.request = std::move(request);
    job.client = std::move(client);
    job.deadline = deadline;
    job.enqueued = absl::Now();
    job.done = std::move(done);
    job.keep_alive = std::move(keep_alive);
    job.started = std::move(started);
    job.module_fds = std::move(module_fds);
    job.beyond_bound = beyond_bound;
    if (job.started == nullptr && job.deadline > job.enqueued && QuickPathOpen(job.client)) {
      quick_busy_ = true;
      quick_worker = quick_worker_;
      in_flight_ids_.insert(job.request.job_id());  // a Cancel now waits for the hand-over
      handed_on_ = 1;
      handed_waiting_bounded_ = 0;
      handed_client_ = job.client;
      running_pid_ = quick_worker->process->pid();
      quick = std::move(job);
    } else {
      const uint64_t id = job.request.job_id();
      turns_.Add(job.client, id, !job.beyond_bound);
      queued_jobs_.insert_or_assign(id, std::move(job));
      wake = std::exchange(sleeping_, false);
    }
  }
  if (quick_worker != nullptr) {
    RunQuick(std::move(quick), quick_worker);
    return absl::OkStatus();
  }
  if (wake) Wake();
  return absl::OkStatus();
}

bool DeviceExecutor::QuickPathOpen(const std::string& client) const {
  // The loop is asleep with nothing to do, and left this client's worker to the quick path.
  return sleeping_ && quick_worker_ != nullptr && !quick_busy_ && !handover_.has_value() &&
         quick_client_ == client && turns_.empty() && cancels_.empty() && !draining_;
}

FrameChannel::Outgoing DeviceExecutor::Frame(Job& job, const JobRunner& worker) {
  if (job.deadline != absl::InfiniteFuture()) {
    job.request.set_deadline_unix_ns(absl::ToUnixNanos(job.deadline));
  }
  // The worker has the modules open from an earlier job: no descriptors to pass (and none to
  // make its read of the frames behind this one stop short).
  const bool withhold = !job.module_fds.empty() && worker.HoldsModulesOf(job.request);
  job.request.set_module_files_withheld(withhold);
  return {&job.request, withhold ? absl::Span<const int>() : job.module_fds};
}

void DeviceExecutor::RunQuick(Job job, Worker* worker) {
  JobRunner* process = worker->process.get();
  Handover handover;
  const absl::Time sent_at = absl::Now();
  if (const FrameChannel::Outgoing frame = Frame(job, *process);
      process->SendMany({&frame, 1}).ok()) {
    handover.sent_at = sent_at;
    if (!job.module_fds.empty()) process->HandedOn(job.request);
    // The answer of a short job is polled for; a worker that has ended is the loop's to reap.
    const absl::Time until = sent_at + worker_options_.busy_poll;
    while (!process->PollAnswer() && absl::Now() < until) sched_yield();
    if (process->HasAnswer()) handover.answer = process->Receive();
  }
  const absl::Time now = absl::Now();
  const std::optional<absl::StatusOr<WorkerAnswer>>& answer = handover.answer;
  if (answer.has_value() && answer->ok() && (*answer)->job_id() == job.request.job_id() &&
      !(*answer)->recycle() && !(*answer)->withdrawn()) {
    // Still the loop's state, and this thread's alone until quick_busy_ is cleared.
    worker->last_job = now;
    last_answer_ = now;
    {
      absl::MutexLock lock(&mutex_);
      quick_busy_ = false;
      handed_on_ = 0;
      running_pid_ = -1;
      ++quick_jobs_;
    }
    Deliver(job, *std::move(handover.answer), sent_at, now);
    return;
  }
  handover.job = std::move(job);
  {
    absl::MutexLock lock(&mutex_);
    handover_ = std::move(handover);
    quick_busy_ = false;
    sleeping_ = false;
  }
  Wake();
}

void DeviceExecutor::Adopt(Handover handover) {
  Job& job = handover.job;
  const auto it = workers_.find(job.client);
  active_client_ = job.client;
  active_ = it != workers_.end() ? it->second.process.get() : nullptr;
  active_broken_ = false;
  if (active_ == nullptr || !handover.sent_at.has_value()) {
    // Not sent: the loop hands it on as it would any queued job, and meets the failure there.
    Requeue(std::move(job));
    return;
  }
  {
    absl::MutexLock lock(&mutex_);
    running_pid_ = active_->pid();
  }
  in_flight_.push_back(std::move(job));
  front_since_ = *handover.sent_at;
  Account();
  if (handover.answer.has_value()) Answer(*std::move(handover.answer));
}

void DeviceExecutor::ParkLastServed(const std::string& next_client) {
  if (worker_options_.busy_poll <= absl::ZeroDuration() || next_client == active_client_ ||
      absl::Now() - last_answer_ >= worker_options_.busy_poll) {
    return;
  }
  const auto it = workers_.find(active_client_);
  if (it == workers_.end() || !it->second.process->alive()) return;
  WorkerRequest park;
  park.mutable_park();
  const FrameChannel::Outgoing frame{&park, {}};
  (void)it->second.process->SendMany({&frame, 1});  // one that has gone is seen at its next job
}

DeviceExecutor::Job DeviceExecutor::TakeNext(const std::string& after) {
  const std::optional<ClientTurns::Next> next = turns_.TakeNext(after);
  auto node = queued_jobs_.extract(next->job_id);
  return std::move(node.mapped());
}

DeviceExecutor::Done DeviceExecutor::TakeFromQueue(uint64_t job_id) {
  if (!turns_.Remove(job_id).has_value()) return nullptr;
  auto node = queued_jobs_.extract(job_id);
  return std::move(node.mapped().done);
}

void DeviceExecutor::Cancel(uint64_t job_id) {
  Done done;
  bool wake = false;
  {
    absl::MutexLock lock(&mutex_);
    if (in_flight_ids_.count(job_id) > 0) {  // with the loop: it stops the job or takes it back
      cancels_.push_back(job_id);
      wake = std::exchange(sleeping_, false);
    } else {
      done = TakeFromQueue(job_id);
    }
  }
  if (wake) Wake();
  if (done) done(absl::CancelledError("the client cancelled; the job left the queue"), {});
}

void DeviceExecutor::Drain(absl::Duration grace) {
  std::deque<Job> refused;
  {
    absl::MutexLock lock(&mutex_);
    draining_ = true;
    while (!turns_.empty()) refused.push_back(TakeNext(""));
    sleeping_ = false;
  }
  Wake();
  for (Job& job : refused) {
    job.done(absl::UnavailableError("kprofd is shutting down; the job did not start"), {});
  }
  {
    absl::MutexLock lock(&mutex_);
    const auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) { return finished_; };
    if (!mutex_.AwaitWithTimeout(absl::Condition(&ended), grace)) {
      base::Log(base::LogSeverity::kWarning,
                absl::StrCat("the job on ", base::DeviceSpec(worker_options_.device),
                             " did not finish within the shutdown grace; killing it"));
      if (running_pid_ > 0) kill(-running_pid_, SIGKILL);
    }
  }
  if (thread_.joinable()) thread_.join();
}

DeviceExecutor::Stats DeviceExecutor::stats() {
  absl::MutexLock lock(&mutex_);
  return Stats{turns_.size() + std::max(handed_on_ - 1, 0),
               handed_on_ > 0,
               completed_,
               failed_,
               workers_running_,
               workers_started_,
               quick_jobs_};
}

absl::StatusOr<JobRunner*> DeviceExecutor::WorkerFor(const std::string& client) {
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
  absl::StatusOr<std::unique_ptr<JobRunner>> spawned = runners_();
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

void DeviceExecutor::EndWorker(const std::string& client) {
  workers_.erase(client);
  absl::MutexLock lock(&mutex_);
  workers_running_ = static_cast<int>(workers_.size());
}

void DeviceExecutor::RetireIdleWorkers() {
  const absl::Time now = absl::Now();
  for (auto it = workers_.begin(); it != workers_.end();) {
    const bool active = it->second.process.get() == active_;
    if (!active &&
        (now - it->second.last_job >= pool_.idle_timeout || !it->second.process->alive())) {
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  absl::MutexLock lock(&mutex_);
  workers_running_ = static_cast<int>(workers_.size());
}

void DeviceExecutor::Requeue(Job job) {
  job.taking_back = false;
  {
    absl::MutexLock lock(&mutex_);
    in_flight_ids_.erase(job.request.job_id());
    if (!draining_) {
      // In order: job ids grow with submission, so the taken-back job goes before the later ones.
      const uint64_t id = job.request.job_id();
      turns_.Add(job.client, id, !job.beyond_bound);
      queued_jobs_.insert_or_assign(id, std::move(job));
      return;
    }
  }
  job.keep_alive.reset();
  job.done(absl::UnavailableError("kprofd is shutting down; the job did not start"), {});
}

void DeviceExecutor::FrontStarted(absl::Time at) {
  front_since_ = at;
  if (in_flight_.empty()) return;
  Job& front = in_flight_.front();
  if (front.cancelled || front.taking_back || !front.started) return;
  std::function<void()> started = std::move(front.started);
  front.started = nullptr;
  started();
}

void DeviceExecutor::Deliver(Job& job, absl::StatusOr<WorkerAnswer> result, absl::Time started,
                             absl::Time ended) {
  const JobTiming timing{std::max(started - job.enqueued, absl::ZeroDuration()), ended - started};
  const bool ok = result.ok() && result->code() == 0;
  {
    // Counted before the answer goes out: a client that asks GetInfo right after its answer
    // must see its job counted.
    absl::MutexLock lock(&mutex_);
    (ok ? completed_ : failed_) += 1;
    in_flight_ids_.erase(job.request.job_id());
  }
  job.keep_alive.reset();  // modules unpinned before the answer, too
  Done done = std::move(job.done);
  if (done) done(std::move(result), timing);
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
  if (first) FrontStarted(absl::Now());
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
  view.own_queued = view.has_worker ? static_cast<size_t>(turns_.Queued(active_client_)) : 0;
  view.others_queued = turns_.OthersWaiting(active_client_);
  view.any_queued = !turns_.empty();
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

void DeviceExecutor::LoseWorker(const absl::Status* front) {
  std::deque<Job> jobs;
  jobs.swap(in_flight_);
  {
    // Each job's id leaves in_flight_ids_ as it is answered or queued again (Deliver, Requeue):
    // a Cancel meanwhile still reaches the loop.
    absl::MutexLock lock(&mutex_);
    handed_on_ = 0;
    handed_waiting_bounded_ = 0;
    running_pid_ = -1;
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
    base::Log(base::LogSeverity::kWarning,
              absl::StrCat(base::DeviceSpec(worker_options_.device), ": ", message));
    LoseWorker(&answer.status());
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
    LoseWorker(nullptr);
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
      LoseWorker(nullptr);  // it is answered; the ones behind it are queued again
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
  handed_on_ = handed_on;
  handed_waiting_bounded_ = waiting_bounded;
  handed_client_ = active_client_;
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
    if (active_ != nullptr && !in_flight_.empty() && active_->HasAnswer()) {
      Answer(active_->Receive());
      continue;
    }
    // Nothing more to do at once: what the answers so far asked to run after them.
    if (!deferred_.empty()) {
      std::vector<std::function<void()>> deferred;
      deferred.swap(deferred_);
      for (auto& fn : deferred) fn();
      continue;
    }
    // Wait for an answer, new work, a cancel, the front job's time to run out, or (idle) the
    // time to end the workers whose clients have gone quiet.
    const absl::Time now = absl::Now();
    absl::Time until = std::max(idle_check, now);
    if (active_ != nullptr && !in_flight_.empty()) {
      until = FrontLimit();
      for (size_t i = 1; i < in_flight_.size(); ++i) {
        if (!in_flight_[i].cancelled) until = std::min(until, in_flight_[i].deadline);
      }
    }
    {
      absl::MutexLock lock(&mutex_);
      if (!cancels_.empty() || (draining_ && turns_.empty() && in_flight_.empty())) continue;
      // Work that came while Refill ran: a job to hand on, or another client's that the jobs
      // handed on beyond the next must make way for.
      if (NextPipelineStep(View()).kind != PipelineStep::kWait) continue;
      sleeping_ = true;
      if (in_flight_.empty() && worker_options_.busy_poll > absl::ZeroDuration()) {
        const auto last = workers_.find(active_client_);
        if (last != workers_.end() && last->second.process->alive()) {
          quick_worker_ = &last->second;
          quick_client_ = active_client_;
        }
      }
    }
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
      continue;
    }
    if (ready > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      Answer(active_->Receive());
      continue;
    }
    const absl::Time after = absl::Now();
    if (active_ != nullptr && !in_flight_.empty()) ExpireHandedOn(after);
    if (active_ != nullptr && !in_flight_.empty()) {
      const Job& front = in_flight_.front();
      const absl::Time limit = FrontLimit();
      if (after >= limit && !active_->HasAnswer()) {
        const bool by_job_timeout = front_since_ + job_timeout_ <= front.deadline;
        const absl::Duration ran = after - front_since_;
        active_->Kill();
        const absl::Status stopped = absl::DeadlineExceededError(absl::StrCat(
            "the job ran ", absl::FormatDuration(by_job_timeout ? job_timeout_ : ran),
            by_job_timeout ? " (the daemon's --job-timeout)" : " (the request's deadline)",
            " and was stopped; its worker was restarted"));
        LoseWorker(&stopped);
      }
    } else if (after >= idle_check) {
      RetireIdleWorkers();
      idle_check = after + std::min(pool_.idle_timeout, absl::Seconds(10));
    }
  }
  in_flight_.clear();
  active_ = nullptr;
  workers_.clear();
  while (!deferred_.empty()) {
    std::vector<std::function<void()>> deferred;
    deferred.swap(deferred_);
    for (auto& fn : deferred) fn();
  }
  absl::MutexLock lock(&mutex_);
  workers_running_ = 0;
  running_pid_ = -1;
  finished_ = true;
}

}  // namespace kprof::server

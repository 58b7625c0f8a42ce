#include "server/front/scheduling/device_executor.h"

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
#include "server/front/modules/module_registry.h"

namespace kprof::server {

using kprof::worker::v1::WorkerAnswer;
using kprof::worker::v1::WorkerRequest;

namespace {

// The kind of job a request holds, for the metrics.
kprof::v1::Priority PriorityOf(const WorkerRequest& request) {
  switch (request.job_case()) {
    case WorkerRequest::kTimeEvaluate:
      return request.time_evaluate().priority();
    case WorkerRequest::kProfileFunction:
      return request.profile_function().priority();
    case WorkerRequest::kProfile:
      return request.profile().priority();
    default:
      return kprof::v1::PRIORITY_DEFAULT;
  }
}

std::string_view JobKind(const WorkerRequest& request) {
  switch (request.job_case()) {
    case WorkerRequest::kTimeEvaluate:
      return "time_evaluate";
    case WorkerRequest::kProfileFunction:
      return "profile_function";
    case WorkerRequest::kProfile:
      return "profile";
    case WorkerRequest::kReference:
      return "reference";
    default:
      return "other";
  }
}

}  // namespace

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
                                    std::vector<int> module_fds, std::string lease_id) {
  // A lease's jobs are queued apart from their client's others, and run in a worker of their own.
  if (!lease_id.empty()) client = LeaseKey(client);
  bool wake = false;
  Job quick;
  Worker* quick_worker = nullptr;
  {
    absl::MutexLock lock(&mutex_);
    if (draining_) return absl::UnavailableError("kprofd is shutting down and takes no new jobs");
    // Jobs are known by id (a cancel names one; a job taken back goes before its client's later
    // ones): one id for two jobs would answer one of them never.
    const uint64_t id = request.job_id();
    if (queued_jobs_.count(id) > 0 || in_flight_ids_.count(id) > 0) {
      return absl::InternalError(absl::StrCat("job id ", id, " is already queued on ",
                                              base::DeviceSpec(worker_options_.device)));
    }
    if (absl::Status refused = LeaseRefusal(client, lease_id, deadline); !refused.ok()) {
      return refused;
    }
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
    job.lease_id = std::move(lease_id);
    // A call's job is interactive unless it says otherwise; a batch stream's is batch.
    const kprof::v1::Priority priority = PriorityOf(job.request);
    job.interactive = priority == kprof::v1::PRIORITY_INTERACTIVE ||
                      (priority == kprof::v1::PRIORITY_DEFAULT && !beyond_bound);
    if (job.started == nullptr && job.deadline > job.enqueued && QuickPathOpen(job.client)) {
      quick_busy_ = true;
      quick_worker = quick_worker_;
      in_flight_ids_.insert(job.request.job_id());  // a Cancel now waits for the hand-over
      handed_on_ = 1;
      handed_waiting_bounded_ = 0;
      handed_client_ = job.client;
      handed_since_ = absl::Now();
      running_pid_ = quick_worker->process->pid();
      quick = std::move(job);
    } else {
      const bool other = job.client != handed_client_;
      turns_.Add(job.client, id, !job.beyond_bound, job.interactive);
      queued_jobs_.emplace(id, std::move(job));
      wake = std::exchange(sleeping_, false);
      // Another client's job behind a pipeline of jobs beyond the next: the worker keeps its
      // next and hands back the rest now, however long the executor's thread waits for a CPU.
      // Under a lease the gate decides who runs; the executor's thread alone does it.
      if (other && yield_to_ != nullptr && handed_on_ > 2 && !lease_.has_value()) {
        yield_to_->TryYield();
      }
    }
  }
  if (quick_worker != nullptr) {
    RunQuick(std::move(quick), quick_worker);
    return absl::OkStatus();
  }
  if (wake) Wake();
  return absl::OkStatus();
}

std::string DeviceExecutor::KeyName(const std::string& key) {
  const size_t nul = key.find('\0');
  return nul == std::string::npos
             ? key
             : absl::StrCat(key.substr(0, nul), " (", key.substr(nul + 1), ")");
}

std::string DeviceExecutor::OwnerOf(const std::string& key) {
  return key.substr(0, key.find('\0'));
}

bool DeviceExecutor::QuickPathOpen(const std::string& client) const {
  // The loop is asleep with nothing to do, and left this client's worker to the quick path.
  return sleeping_ && quick_worker_ != nullptr && !quick_busy_ && !handover_.has_value() &&
         quick_client_ == client && turns_.empty() && cancels_.empty() && !draining_ &&
         Admitted(client);
}

bool DeviceExecutor::Admitted(const std::string& client) const {
  return !lease_.has_value() || (lease_->open && (client == LeaseKey(lease_->holder) ||
                                                  client == ReferenceKey(lease_->holder)));
}

absl::Status DeviceExecutor::LeaseRefusal(const std::string& client, const std::string& lease_id,
                                          absl::Time deadline) const {
  if (!lease_id.empty()) {
    if (!lease_.has_value() || lease_->lease_id != lease_id || lease_->ending) {
      return absl::FailedPreconditionError(absl::StrCat(
          "lease ", lease_id,
          lease_.has_value() && lease_->lease_id == lease_id ? " has ended" : " is not held",
          " on ", base::DeviceSpec(worker_options_.device),
          ": a job made under it never runs without it"));
    }
    return absl::OkStatus();
  }
  if (!lease_.has_value() || deadline >= lease_->ends || client == ReferenceKey(lease_->holder)) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(
      absl::StrCat(lease_->what, ", after this request's deadline: the job would wait past it"));
}

void DeviceExecutor::SetLease(std::optional<LeaseGate> gate, std::function<void()> clear) {
  std::vector<std::pair<Job, absl::Status>> refused;
  bool wake = false;
  std::function<void()> clear_now;
  {
    absl::MutexLock lock(&mutex_);
    lease_ = std::move(gate);
    lease_clear_ = std::move(clear);
    if (finished_) clear_now = std::exchange(lease_clear_, nullptr);  // nothing runs any more
    // The jobs the gate now refuses: others' that would wait past their deadline, and a lease's
    // own once it ends.
    for (auto it = queued_jobs_.begin(); it != queued_jobs_.end();) {
      absl::Status status =
          LeaseRefusal(it->second.client, it->second.lease_id, it->second.deadline);
      if (status.ok()) {
        ++it;
        continue;
      }
      turns_.Remove(it->first);
      ++failed_;
      refused.emplace_back(std::move(it->second), std::move(status));
      it = queued_jobs_.erase(it);
    }
    wake = std::exchange(sleeping_, false);
  }
  // On this thread (the LeaseManager's), as a Cancel answers on its caller's.
  for (auto& [job, status] : refused) {
    job.keep_alive.reset();
    job.done(status, {});
  }
  if (wake) Wake();
  if (clear_now) clear_now();
}

void DeviceExecutor::CheckLeaseClear() {
  std::function<void()> clear;
  {
    absl::MutexLock lock(&mutex_);
    if (lease_clear_ && (in_flight_.empty() || Admitted(active_client_))) {
      clear = std::move(lease_clear_);
      lease_clear_ = nullptr;
    }
  }
  if (clear) clear();
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
  // Under a lease, the holder's jobs alone, its reference runs first: its leased jobs' checks
  // wait for them (a drain takes every one).
  std::optional<ClientTurns::Next> next;
  if (lease_.has_value() && !draining_) {
    const std::string reference = ReferenceKey(lease_->holder);
    next = turns_.TakeNextOf(turns_.HasJobs(reference) ? reference : LeaseKey(lease_->holder));
  } else {
    next = turns_.TakeNext(after);
  }
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
  Stats stats;
  stats.queue_length = turns_.size() + std::max(handed_on_ - 1, 0);
  stats.busy = handed_on_ > 0;
  stats.completed = completed_;
  stats.failed = failed_;
  stats.workers = workers_running_;
  stats.workers_started = workers_started_;
  stats.quick_jobs = quick_jobs_;
  if (handed_on_ > 0) {
    stats.running_client = KeyName(handed_client_);
    stats.running_for = absl::Now() - handed_since_;
  }
  const std::map<std::string, int> queued = turns_.QueuedByClient();
  for (const std::string& client : turns_.turns()) {
    stats.queued.emplace_back(KeyName(client), queued.at(client));
  }
  if (handed_on_ > 1) {
    const std::string handed = KeyName(handed_client_);
    auto it = stats.queued.begin();
    while (it != stats.queued.end() && it->first != handed) ++it;
    if (it != stats.queued.end()) {
      it->second += handed_on_ - 1;
    } else {
      stats.queued.emplace(stats.queued.begin(), handed, handed_on_ - 1);
    }
  }
  return stats;
}

void DeviceExecutor::SetClientWeights(std::function<int(const std::string&)> weight_of) {
  absl::MutexLock lock(&mutex_);
  turns_.SetWeights(std::move(weight_of));
}

void DeviceExecutor::Requeue(Job job) {
  job.taking_back = false;
  absl::Status refused;
  {
    absl::MutexLock lock(&mutex_);
    in_flight_ids_.erase(job.request.job_id());
    refused = LeaseRefusal(job.client, job.lease_id, job.deadline);
    if (!draining_ && refused.ok()) {
      // In order: job ids grow with submission, so the taken-back job goes before the later ones.
      const uint64_t id = job.request.job_id();
      turns_.Add(job.client, id, !job.beyond_bound, job.interactive);
      queued_jobs_.insert_or_assign(id, std::move(job));
      return;
    }
  }
  job.keep_alive.reset();
  job.done(refused.ok() ? absl::UnavailableError("kprofd is shutting down; the job did not start")
                        : refused,
           {});
}

void DeviceExecutor::Deliver(Job& job, absl::StatusOr<WorkerAnswer> result, absl::Time started,
                             absl::Time ended) {
  JobTiming timing{std::max(started - job.enqueued, absl::ZeroDuration()), ended - started};
  const bool ok = result.ok() && result->code() == 0;
  {
    // Counted before the answer goes out: a client that asks GetInfo right after its answer
    // must see its job counted.
    absl::MutexLock lock(&mutex_);
    (ok ? completed_ : failed_) += 1;
    if (result.ok()) timing.sequence = ++ran_;  // one job runs at a time: answers come in order
    in_flight_ids_.erase(job.request.job_id());
  }
  if (metrics_ != nullptr) {
    metrics_->JobDone(
        worker_options_.device, JobKind(job.request),
        result.ok() ? static_cast<absl::StatusCode>(result->code()) : result.status().code(),
        OwnerOf(job.client), timing.queue_wait, timing.execution);
  }
  job.keep_alive.reset();  // modules unpinned before the answer, too
  Done done = std::move(job.done);
  if (done) done(std::move(result), timing);
}

}  // namespace kprof::server

// MeasureBatch: many jobs on one bidirectional stream. Jobs wait in the stream's own queue; one
// per device at a time goes to the device's executor (the shared queue stays short, and other
// clients' jobs interleave), and each job's updates are written back as they happen.
//
// Threads: gRPC's (reads, writes, cancellation) and the executors' (a job started or finished)
// all change the state under `mutex_`, then call Kick. Kick lets one thread at a time turn the
// state into gRPC operations, so no operation is ever started after Finish, and the reactor is
// deleted only once gRPC is done with it (OnDone), no executor holds one of its jobs, and no
// thread is inside Kick.
#include <deque>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "core/modules/builtin_module.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/status.h"
#include "server/front/batch_outbox.h"
#include "server/front/grpc_status.h"
#include "server/front/module_registry.h"
#include "server/front/profiler_service.h"
#include "server/worker/job_options.h"

namespace kprof::server {
namespace {

using kprof::v1::BatchJob;
using BatchUpdate = BatchOutbox::Update;

constexpr size_t kMaxIdLength = 256;
// Jobs in one message, and in one stream: a client that wants more opens another stream.
constexpr int kMaxJobsPerMessage = 10'000;
constexpr uint64_t kMaxJobsPerStream = 1'000'000;
// Jobs a stream may hold (waiting, running, or with updates not yet written) before it stops
// reading: past this the client's writes wait on gRPC's flow control.
constexpr size_t kMaxOutstanding = 4096;
// Jobs of one stream handed to one device's executor at a time: enough to keep its worker's
// pipeline full (WorkerPool::pipeline_depth).
constexpr int kInExecutorPerDevice = 16;
// Bytes a stream may hold in the front: of jobs waiting (past it, it stops reading), and of
// updates its client has not read yet (past it, no further job goes to a device: a client that
// reads slowly, or never, stalls its own stream, not the daemon's memory). A result of a
// million repeats is some 9 MB; the jobs already with an executor may add theirs on top.
constexpr size_t kMaxHeldBytes = size_t{32} << 20;
// BatchRequest.modules: the bytes of one at most (a message's are at most the daemon's largest
// message, 16 MiB).
constexpr size_t kMaxInlineModuleBytes = size_t{4} << 20;

// Two independent 64-bit hashes of an id: a stream remembers up to a million ids in 16 bytes
// each, not in up to 256, and a false "used twice" needs both to collide.
std::pair<uint64_t, uint64_t> IdHash(const std::string& id) {
  uint64_t fnv = 14695981039346656037ull;
  for (unsigned char c : id) fnv = (fnv ^ c) * 1099511628211ull;
  return {std::hash<std::string>{}(id), fnv};
}

}  // namespace

class ProfilerService::BatchReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BatchReactor(ProfilerService* service, grpc::CallbackServerContext* context, std::string client)
      : service_(service), client_(std::move(client)), deadline_(Deadline(context)) {}

  // After the service has registered (or refused) the stream.
  void Begin(const absl::Status& refused) {
    {
      absl::MutexLock lock(&mutex_);
      if (!refused.ok()) {
        error_ = refused;
      } else {
        want_read_ = true;
      }
    }
    Kick();
  }

  // Keeps the reactor from being deleted until Unpin; false when it is already being deleted.
  // Called under the service's lock, so that a reactor in its set is still there.
  bool Pin() {
    absl::MutexLock lock(&mutex_);
    if (Unused()) return false;  // its last user is on the way to Delete
    ++pins_;
    return true;
  }

  void Unpin() {
    bool last = false;
    {
      absl::MutexLock lock(&mutex_);
      --pins_;
      last = Unused();
    }
    if (last) Delete();
  }

  // The daemon is shutting down: no more reading; the stream ends UNAVAILABLE once what it
  // holds is answered. On a pinned reactor.
  void Drain() {
    {
      absl::MutexLock lock(&mutex_);
      draining_ = true;
    }
    Kick();
  }

  void OnReadDone(bool ok) override {
    // The message is this thread's until the next read: parsed, and its modules stored, before
    // the lock (a store writes a file, which the executors' answers need not wait for).
    const bool parsed = ok && grpc::SerializationTraits<kprof::v1::BatchRequest>::Deserialize(
                                  &incoming_bytes_, &incoming_)
                                  .ok();
    std::vector<std::pair<std::string, absl::Status>> refused;
    if (parsed && incoming_.jobs_size() <= kMaxJobsPerMessage) {
      for (const kprof::v1::InlineModule& module : incoming_.modules()) {
        if (absl::Status s = StoreInline(module); !s.ok()) {
          refused.emplace_back(module.header().sha256(), std::move(s));
        }
      }
    }
    {
      absl::MutexLock lock(&mutex_);
      reading_ = false;
      for (auto& [id, status] : refused) refused_modules_[id] = std::move(status);
      if (!ok) {
        reads_done_ = true;
      } else if (!parsed) {
        Protocol(absl::InvalidArgumentError(
            "a BatchRequest that does not parse (not a kprof.v1.BatchRequest in protobuf)"));
      } else {
        if (incoming_.jobs_size() > kMaxJobsPerMessage) {
          Protocol(absl::InvalidArgumentError(absl::StrCat("a BatchRequest of ",
                                                           incoming_.jobs_size(), " jobs (limit ",
                                                           kMaxJobsPerMessage, " per message)")));
        } else {
          if (incoming_.updates_per_message() > 0) {
            outbox_.SetUpdatesPerMessage(incoming_.updates_per_message());
          }
          for (BatchJob& job : *incoming_.mutable_jobs()) Accept(std::move(job));
        }
        incoming_.Clear();
        want_read_ = true;
      }
    }
    Kick();
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mutex_);
      writing_ = false;
      outbox_.Written(ok);
      if (!ok) broken_ = true;  // the client is gone; OnCancel follows
    }
    Kick();
  }

  void OnCancel() override {
    std::vector<std::pair<DeviceExecutor*, uint64_t>> running;
    {
      absl::MutexLock lock(&mutex_);
      cancelled_ = true;
      running = StopAll();
    }
    for (const auto& [executor, job_id] : running) executor->Cancel(job_id);
    Kick();
  }

  void OnDone() override {
    bool last = false;
    {
      absl::MutexLock lock(&mutex_);
      done_ = true;
      last = Unused();
    }
    if (last) Delete();
  }

 private:
  struct Waiting {
    std::string id;
    BatchJob job;
    absl::Time received;  // when the stream read it: its queue wait starts here
    // Its module, kept from eviction from the moment the stream accepted the job: a module
    // evicted under queued jobs would fail them all as unknown.
    std::shared_ptr<void> module_pin;
    size_t bytes = 0;  // of the job's message, counted in waiting_bytes_
  };
  struct InExecutor {
    std::string id;
    std::string device;
    DeviceExecutor* executor = nullptr;
    bool running = false;
    size_t result_bytes = 0;  // its result's size, as guessed (ResultBytes)
  };

  // A guess at the size of a job's result, to bound what results the jobs with executors may
  // add to the outbox: some 9 bytes per repeat for its seconds and numbers, and the rest.
  static size_t ResultBytes(const BatchJob& job) {
    const int64_t repeat =
        job.has_time_evaluate()
            ? (job.time_evaluate().has_repeat() ? job.time_evaluate().repeat() : 1)
            : 1;
    return 4096 + 20 * static_cast<size_t>(std::max<int64_t>(repeat, 1));
  }

  bool Unused() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return done_ && in_executor_.empty() && !kicking_ && pins_ == 0;
  }

  void Delete() {
    service_->Unregister(this);
    delete this;
  }

  size_t Outstanding() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return waiting_count_ + in_executor_.size() + outbox_.size() + outbox_.writing_count();
  }

  // Takes every waiting job away and says which are with executors, to cancel them.
  std::vector<std::pair<DeviceExecutor*, uint64_t>> StopAll()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    waiting_.clear();
    waiting_count_ = 0;
    waiting_bytes_ = 0;
    std::vector<std::pair<DeviceExecutor*, uint64_t>> running;
    for (const auto& [job_id, slot] : in_executor_) running.emplace_back(slot.executor, job_id);
    return running;
  }

  // A client that breaks the protocol: the stream ends with `status`; its jobs are stopped.
  void Protocol(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (error_.ok()) error_ = status;
    to_cancel_ = StopAll();
  }

  void Update(const std::string& id, BatchUpdate::State state, BatchUpdate update = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    outbox_.Count(state);
    if (broken_ || cancelled_ || !error_.ok()) return;
    outbox_.Push(id, state, std::move(update), absl::Now());
  }

  void Fail(const std::string& id, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    BatchUpdate update;
    update.set_code(wire::ToWireCode(status.code()));
    update.set_message(std::string(status.message()));
    wire::DetailsToProto(status, update.mutable_details());
    Update(id, BatchUpdate::FAILED, std::move(update));
  }

  // A job read from the stream: checked, then queued behind its device's others. An id that
  // is missing, too long or used twice breaks the protocol (its answer could not be told from
  // another job's), and so ends the stream.
  void Accept(BatchJob job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (!error_.ok() || cancelled_) return;
    std::string id = job.id();
    if (id.empty() || id.size() > kMaxIdLength) {
      Protocol(absl::InvalidArgumentError(absl::StrCat("a batch job's id is ", id.size(),
                                                       " bytes (accepted: 1 to ", kMaxIdLength,
                                                       ", unique within the stream)")));
      return;
    }
    if (ids_.size() >= kMaxJobsPerStream) {
      Protocol(absl::ResourceExhaustedError(
          absl::StrCat("more than ", kMaxJobsPerStream, " jobs in one stream: open another")));
      return;
    }
    if (!ids_.insert(IdHash(id)).second) {
      Protocol(absl::InvalidArgumentError(
          absl::StrCat("job id '", id, "' is used twice in this stream (ids must be unique)")));
      return;
    }
    std::string device;
    switch (job.job_case()) {
      case BatchJob::kTimeEvaluate:
        device = job.time_evaluate().device();
        break;
      case BatchJob::kProfileFunction:
        device = job.profile_function().device();
        break;
      case BatchJob::JOB_NOT_SET:
        Fail(id, absl::InvalidArgumentError("a batch job needs time_evaluate or profile_function"));
        return;
    }
    // Only devices this daemon has get a queue: a job for another fails at once.
    const absl::StatusOr<DeviceExecutor*> executor = service_->FindExecutor(device);
    if (!executor.ok()) {
      Fail(id, executor.status());
      return;
    }
    // Its options as the worker will read them: a bad job is refused now, not after its wait.
    if (absl::Status checked =
            CheckBatchJobOptions(job, (*executor)->device(), service_->limits_.max_argument_bytes);
        !checked.ok()) {
      Fail(id, checked);
      return;
    }
    const std::string& module = job.has_time_evaluate() ? job.time_evaluate().call().module_id()
                                                        : job.profile_function().call().module_id();
    std::shared_ptr<void> pin;
    if (!module.empty() && module != core::kBuiltinModuleName) {
      std::vector<StoredModule> modules;
      absl::StatusOr<std::shared_ptr<ModuleRegistry::Pin>> acquired =
          service_->registry_->Acquire(client_, {module}, &modules, /*open_files=*/false);
      if (!acquired.ok()) {
        // An unknown module: the job may come again under its id once the module is uploaded.
        ids_.erase(IdHash(id));
        const auto refused = refused_modules_.find(module);
        // One sent on this stream and refused fails the job with the reason (as LoadModule
        // would have failed).
        Fail(id,
             refused == refused_modules_.end() || !absl::IsNotFound(acquired.status())
                 ? acquired.status()
                 : absl::Status(refused->second.code(),
                                absl::StrCat("module ", module, " sent on the stream was refused: ",
                                             refused->second.message())));
        return;
      }
      pin = *std::move(acquired);
    }
    Update(id, BatchUpdate::QUEUED);
    const size_t bytes = job.ByteSizeLong();
    waiting_[base::DeviceSpec((*executor)->device())].push_back(
        Waiting{std::move(id), std::move(job), absl::Now(), std::move(pin), bytes});
    ++waiting_count_;
    waiting_bytes_ += bytes;
  }

  // A module sent on the stream, checked and stored as LoadModule would.
  absl::Status StoreInline(const kprof::v1::InlineModule& module) {
    const kprof::v1::ModuleHeader& header = module.header();
    const std::string& bytes = module.bytes();
    if (bytes.size() > kMaxInlineModuleBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("a module sent on the stream has ", bytes.size(), " bytes (at most ",
                       kMaxInlineModuleBytes, "); upload it with LoadModule"));
    }
    if (header.size_bytes() != bytes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("a module sent on the stream declares ",
                                                     header.size_bytes(), " bytes and carries ",
                                                     bytes.size()));
    }
    ModuleRegistry* registry = service_->registry_;
    KPROF_RETURN_IF_ERROR(registry->CheckHeader(header.name(), header.format(), header.size_bytes(),
                                                header.sha256()));
    KPROF_ASSIGN_OR_RETURN(std::unique_ptr<ModuleRegistry::Upload> upload, registry->BeginUpload());
    KPROF_RETURN_IF_ERROR(upload->Append(bytes));
    base::Sha256 hash;
    hash.Update(bytes);
    return registry
        ->Store(client_, header.name(), header.format(), *upload, header.size_bytes(),
                header.sha256(), hash.HexDigest())
        .status();
  }

  // Hands waiting jobs to executors, up to kInExecutorPerDevice each, while the client keeps up
  // with reading the updates.
  void Dispatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (outbox_.bytes() >= kMaxHeldBytes) return;  // the write that makes room kicks again
    size_t held = outbox_.bytes();
    for (const auto& [job_id, slot] : in_executor_) held += slot.result_bytes;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      auto& [device, jobs] = *it;
      int busy = 0;
      for (const auto& [job_id, slot] : in_executor_) busy += slot.device == device;
      // Up to kInExecutorPerDevice, while the results they may bring fit the bound (one at a
      // time past it).
      while (busy < kInExecutorPerDevice && !jobs.empty() &&
             (busy == 0 || held + ResultBytes(jobs.front().job) <= kMaxHeldBytes)) {
        held += ResultBytes(jobs.front().job);
        Waiting next = std::move(jobs.front());
        jobs.pop_front();
        --waiting_count_;
        waiting_bytes_ -= next.bytes;
        if (const absl::Status s = Submit(device, next); !s.ok()) {
          outbox_.Leave(/*was_running=*/false);
          Fail(next.id, s);
          continue;
        }
        ++busy;
      }
      it = jobs.empty() ? waiting_.erase(it) : std::next(it);
    }
  }

  // Lets one thread at a time turn the state into gRPC operations.
  void Kick() {
    {
      absl::MutexLock lock(&mutex_);
      if (kicking_ || done_) {
        again_ = !done_;
        return;
      }
      kicking_ = true;
    }
    while (true) {
      bool read = false, finish = false, write = false, arm = false;
      absl::Time flush_at;
      grpc::Status status;
      std::vector<std::pair<DeviceExecutor*, uint64_t>> cancel;
      {
        absl::MutexLock lock(&mutex_);
        again_ = false;
        cancel.swap(to_cancel_);
        if (!finished_) {
          const bool stopping = cancelled_ || !error_.ok();
          if (!stopping) Dispatch();
          if (!stopping && !draining_ && want_read_ && !reading_ && !reads_done_ &&
              Outstanding() < kMaxOutstanding && waiting_bytes_ < kMaxHeldBytes) {
            want_read_ = false;
            reading_ = true;
            read = true;
          }
          if (!stopping && !writing_ && !outbox_.empty() && !broken_) {
            // Updates wait for company while the stream has jobs running and more waiting; at
            // once when none waits (a client that sends more only as answers come is never kept
            // waiting for them).
            const bool more_coming = !draining_ && waiting_count_ > 0 && !in_executor_.empty();
            if (!outbox_.Hold(more_coming, absl::Now(), &flush_at)) {
              writing_ = true;
              write = true;
              outgoing_ = outbox_.TakeMessage();
            } else if (!flush_armed_) {
              flush_armed_ = true;
              ++pins_;  // until the alarm's callback
              arm = true;
            }
          }
          const bool answered =
              in_executor_.empty() && waiting_count_ == 0 && outbox_.empty() && !writing_;
          if (cancelled_) {
            finish = true;
            status = grpc::Status::CANCELLED;
          } else if (!error_.ok()) {
            finish = true;
            status = ToGrpcStatus(error_);
          } else if (answered && reads_done_) {
            finish = true;
          } else if (answered && draining_) {
            finish = true;
            status = ToGrpcStatus(absl::UnavailableError(
                "kprofd is shutting down: the jobs sent so far are answered; send the rest to "
                "another daemon"));
          }
          if (finish) finished_ = true;
        }
        if (arm) {
          // A fresh alarm each time: one is never set again from its own callback. Replacing
          // one not yet fired cancels it, which runs its callback all the same.
          flush_alarm_ = std::make_unique<grpc::Alarm>();
          flush_alarm_->Set(absl::ToChronoTime(flush_at), [this](bool) {
            {
              absl::MutexLock fired(&mutex_);
              flush_armed_ = false;
            }
            Kick();
            Unpin();
          });
          arm = false;
        }
        if (!read && !write && !finish && cancel.empty() && !again_) {
          kicking_ = false;
          if (Unused()) break;
          return;
        }
      }
      for (const auto& [executor, job_id] : cancel) executor->Cancel(job_id);
      if (read) StartRead(&incoming_bytes_);
      if (write) {
        // Only this thread (the one kicking) touches them until the write is done.
        bool own_buffer = false;
        outgoing_bytes_.Clear();  // the last write's
        (void)grpc::SerializationTraits<BatchUpdate>::Serialize(outgoing_, &outgoing_bytes_,
                                                                &own_buffer);
        outgoing_.Clear();
        StartWrite(&outgoing_bytes_);
      }
      if (finish) Finish(status);
    }
    Delete();  // OnDone came while this thread was kicking
  }

  absl::Status Submit(const std::string& device, Waiting& waiting)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    // The job waited in this stream before it reached the device's queue: that is queue wait
    // too (the executor counts from its own queue on).
    const absl::Duration held = absl::Now() - waiting.received;
    kprof::worker::v1::WorkerRequest request;
    std::vector<const kprof::v1::FunctionCall*> calls;
    const bool time = waiting.job.has_time_evaluate();
    if (time) {
      *request.mutable_time_evaluate() = waiting.job.time_evaluate();
      calls.push_back(&waiting.job.time_evaluate().call());
    } else {
      if (waiting.job.profile_function().collectors_size() > kMaxCollectors) {
        return absl::InvalidArgumentError(
            absl::StrCat(waiting.job.profile_function().collectors_size(), " collectors (limit ",
                         kMaxCollectors, ")"));
      }
      *request.mutable_profile_function() = waiting.job.profile_function();
      calls.push_back(&waiting.job.profile_function().call());
    }
    absl::StatusOr<PreparedJob> job =
        service_->PrepareJob(client_, device, calls, std::move(request), /*options_checked=*/true);
    if (!job.ok()) return job.status();
    const uint64_t job_id = job->request.job_id();
    DeviceExecutor* executor = job->executor;
    const std::string id = waiting.id;
    const std::string what = job->what;
    // Past the shared queue's bound if need be: this stream holds at most
    // kInExecutorPerDevice there, so a queue full of other clients' jobs delays it, never
    // fails it.
    const absl::Status submitted = executor->Submit(
        std::move(job->request), client_, deadline_,
        [this, job_id, id, what, time, held](absl::StatusOr<kprof::worker::v1::WorkerAnswer> result,
                                             JobTiming timing) {
          timing.queue_wait += held;
          Finished(job_id, id, ResultStatus(result, what), result, timing, time);
        },
        std::move(job->pin), [this, job_id, id] { Started(job_id, id); },
        /*beyond_bound=*/true, std::move(job->module_fds));
    if (!submitted.ok()) return submitted;
    in_executor_[job_id] = InExecutor{id, device, executor, false, ResultBytes(waiting.job)};
    return absl::OkStatus();
  }

  void Started(uint64_t job_id, const std::string& id) {
    DeviceExecutor* executor = nullptr;
    {
      absl::MutexLock lock(&mutex_);
      const auto it = in_executor_.find(job_id);
      if (it == in_executor_.end()) return;
      it->second.running = true;
      executor = it->second.executor;
      Update(id, BatchUpdate::RUNNING);
      ++pins_;  // the job is with the executor, so the stream is not deleted before this
    }
    if (executor->OnItsThread()) {
      KickLater(executor);
    } else {
      Kick();
    }
    Unpin();
  }

  // On an executor's thread: the updates of the answers it handles together go out together,
  // once it has handled them (DeviceExecutor::Defer), rather than a write each.
  void KickLater(DeviceExecutor* executor) {
    {
      absl::MutexLock lock(&mutex_);
      if (!kick_deferred_.insert(executor).second) return;  // one is due already
      ++pins_;
    }
    executor->Defer([this, executor] {
      {
        absl::MutexLock lock(&mutex_);
        kick_deferred_.erase(executor);
      }
      Kick();
      Unpin();
    });
  }

  void Finished(uint64_t job_id, const std::string& id, const absl::Status& status,
                absl::StatusOr<kprof::worker::v1::WorkerAnswer>& result, JobTiming timing,
                bool time) {
    bool last = false;
    DeviceExecutor* executor = nullptr;
    {
      absl::MutexLock lock(&mutex_);
      const auto it = in_executor_.find(job_id);
      const bool was_running = it != in_executor_.end() && it->second.running;
      if (it != in_executor_.end()) {
        executor = it->second.executor;
        in_executor_.erase(it);
      }
      outbox_.Leave(was_running);
      if (status.ok()) {
        BatchUpdate update;
        if (time) {
          std::string* out = update.mutable_time_evaluate();
          *out = std::move(*result->mutable_time_evaluate());
          AppendTiming(timing, kprof::v1::TimeEvaluateResponse::kTimingFieldNumber, out);
        } else {
          std::string* out = update.mutable_profile_function();
          *out = std::move(*result->mutable_profile_function());
          AppendTiming(timing, kprof::v1::ProfileFunctionResponse::kTimingFieldNumber, out);
        }
        Update(id, BatchUpdate::DONE, std::move(update));
      } else {
        Fail(id, status);
      }
      last = Unused();
      if (!last) ++pins_;  // held until the kick below: another thread may end the stream now
    }
    if (last) {
      Delete();
      return;
    }
    // Answers that come together (a worker several jobs deep) are written together.
    if (executor != nullptr && executor->OnItsThread()) {
      KickLater(executor);
    } else {
      Kick();
    }
    Unpin();
  }

  ProfilerService* const service_;
  const std::string client_;  // who sent the stream (ProfilerService::Authenticate)
  const absl::Time deadline_;
  grpc::ByteBuffer incoming_bytes_;   // touched by the read in flight only
  kprof::v1::BatchRequest incoming_;  // parsed from it, in OnReadDone
  BatchUpdate outgoing_;              // the next write's updates (BatchOutbox::TakeMessage)
  grpc::ByteBuffer outgoing_bytes_;   // the write in flight, serialized

  absl::Mutex mutex_;
  std::set<std::pair<uint64_t, uint64_t>> ids_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::deque<Waiting>> waiting_ ABSL_GUARDED_BY(mutex_);  // by device
  size_t waiting_count_ ABSL_GUARDED_BY(mutex_) = 0;
  std::map<uint64_t, InExecutor> in_executor_ ABSL_GUARDED_BY(mutex_);  // by job id
  // Modules sent on the stream and refused, by declared id, and why.
  std::map<std::string, absl::Status> refused_modules_ ABSL_GUARDED_BY(mutex_);
  std::vector<std::pair<DeviceExecutor*, uint64_t>> to_cancel_ ABSL_GUARDED_BY(mutex_);
  size_t waiting_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  BatchOutbox outbox_ ABSL_GUARDED_BY(mutex_);
  std::unique_ptr<grpc::Alarm> flush_alarm_ ABSL_GUARDED_BY(mutex_);
  bool flush_armed_ ABSL_GUARDED_BY(mutex_) = false;  // the alarm's callback is still to come
  absl::Status error_ ABSL_GUARDED_BY(mutex_);        // ends the stream
  bool want_read_ ABSL_GUARDED_BY(mutex_) = false;
  bool reading_ ABSL_GUARDED_BY(mutex_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mutex_) = false;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool broken_ ABSL_GUARDED_BY(mutex_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mutex_) = false;
  bool draining_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
  bool kicking_ ABSL_GUARDED_BY(mutex_) = false;
  bool again_ ABSL_GUARDED_BY(mutex_) = false;
  int pins_ ABSL_GUARDED_BY(mutex_) = 0;  // StartDraining's and KickLater's holds on it
  std::set<DeviceExecutor*> kick_deferred_ ABSL_GUARDED_BY(mutex_);  // KickLater's, due
};

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ProfilerService::MeasureBatch(
    grpc::CallbackServerContext* context) {
  absl::StatusOr<std::string> client = Authenticate(context);
  absl::Status admitted = client.status();
  auto* reactor = new BatchReactor(this, context, client.ok() ? *std::move(client) : "");
  {
    // Counted like an upload, under the lock StartDraining takes: a stream either is known to
    // the drain, or is refused.
    absl::MutexLock lock(&uploads_mutex_);
    if (admitted.ok() && draining_) admitted = absl::UnavailableError("kprofd is shutting down");
    if (admitted.ok() && batches_.size() >= kMaxBatchStreams) {
      admitted = absl::ResourceExhaustedError(
          absl::StrCat(batches_.size(), " batch streams are open (limit ", kMaxBatchStreams,
                       "); retry when one ends"));
    }
    batches_.insert(reactor);
    ++uploads_;
  }
  reactor->Begin(admitted);
  return reactor;
}

void ProfilerService::Unregister(BatchReactor* reactor) {
  absl::MutexLock lock(&uploads_mutex_);
  if (batches_.erase(reactor) > 0) --uploads_;
}

void ProfilerService::StartDraining() {
  // Each open stream is pinned under the lock (a reactor leaves the set, under it, before it is
  // deleted), then drained without it: draining may end the stream, and the one who sees it
  // end deletes it, which takes the lock to unregister it.
  std::vector<BatchReactor*> open;
  {
    absl::MutexLock lock(&uploads_mutex_);
    draining_ = true;
    for (BatchReactor* batch : batches_) {
      if (batch->Pin()) open.push_back(batch);
    }
  }
  for (BatchReactor* batch : open) batch->Drain();
  for (BatchReactor* batch : open) batch->Unpin();
}

}  // namespace kprof::server

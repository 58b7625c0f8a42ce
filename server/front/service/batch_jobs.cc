// ProfilerService::BatchReactor's jobs: accepted from the stream, handed to the devices' executors
// a few at a time, and their answers turned into updates (batch_reactor.h).
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "core/measure/time_evaluator.h"
#include "core/modules/builtin_module.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/status.h"
#include "server/front/modules/module_registry.h"
#include "server/front/service/batch_dispatch.h"
#include "server/front/service/batch_reactor.h"
#include "server/front/service/grpc_status.h"
#include "server/front/service/profiler_service.h"
#include "server/worker/job_options.h"

namespace kprof::server {

std::pair<uint64_t, uint64_t> ProfilerService::BatchReactor::IdHash(const std::string& id) {
  uint64_t fnv = 14695981039346656037ull;
  for (unsigned char c : id) fnv = (fnv ^ c) * 1099511628211ull;
  return {std::hash<std::string>{}(id), fnv};
}

size_t ProfilerService::BatchReactor::ResultBytes(const BatchJob& job) {
  int64_t repeat = 1;
  if (job.has_time_evaluate()) {
    const kprof::v1::TimeEvaluateRequest& r = job.time_evaluate();
    const bool converging = r.until_stable() || r.max_relative_stddev() != 0;
    repeat = r.has_repeat() ? r.repeat() : converging ? core::kDefaultConvergenceRepeats : 1;
  }
  return 4096 + 20 * static_cast<size_t>(std::max<int64_t>(repeat, 1));
}

void ProfilerService::BatchReactor::Update(const std::string& id, BatchUpdate::State state,
                                           BatchUpdate update) {
  outbox_.Count(state);
  if (broken_ || cancelled_ || !error_.ok()) return;
  outbox_.Push(id, state, std::move(update), absl::Now());
}

void ProfilerService::BatchReactor::Fail(const std::string& id, const absl::Status& status) {
  BatchUpdate update;
  update.set_code(wire::ToWireCode(status.code()));
  update.set_message(std::string(status.message()));
  wire::DetailsToProto(status, update.mutable_details());
  Update(id, BatchUpdate::FAILED, std::move(update));
}

void ProfilerService::BatchReactor::Accept(BatchJob job) {
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
      Waiting{std::move(id), std::move(job), absl::Now(), std::move(pin), bytes, check_});
  ++waiting_count_;
  waiting_bytes_ += bytes;
}

absl::Status ProfilerService::BatchReactor::StoreInline(const kprof::v1::InlineModule& module) {
  const kprof::v1::ModuleHeader& header = module.header();
  const std::string& bytes = module.bytes();
  if (bytes.size() > kMaxInlineModuleBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a module sent on the stream has ", bytes.size(),
                                                   " bytes (at most ", kMaxInlineModuleBytes,
                                                   "); upload it with LoadModule"));
  }
  if (header.size_bytes() != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("a module sent on the stream declares ",
                                                   header.size_bytes(), " bytes and carries ",
                                                   bytes.size()));
  }
  ModuleRegistry* registry = service_->registry_;
  KPROF_RETURN_IF_ERROR(
      registry->CheckHeader(header.name(), header.format(), header.size_bytes(), header.sha256()));
  KPROF_ASSIGN_OR_RETURN(std::unique_ptr<ModuleRegistry::Upload> upload, registry->BeginUpload());
  KPROF_RETURN_IF_ERROR(upload->Append(bytes));
  base::Sha256 hash;
  hash.Update(bytes);
  return registry
      ->Store(client_, header.name(), header.format(), *upload, header.size_bytes(),
              header.sha256(), hash.HexDigest())
      .status();
}

void ProfilerService::BatchReactor::Dispatch() {
  if (outbox_.bytes() >= kMaxHeldBytes) return;  // the write that makes room kicks again
  const DispatchLimits limits{kInExecutorPerDevice, kMaxHeldBytes};
  // Planned again only when a job was refused on its way: the room it did not take is free.
  for (bool refused = true; refused && !waiting_.empty();) {
    refused = false;
    size_t held = outbox_.bytes();
    std::map<std::string, int> busy;
    for (const auto& [job_id, slot] : in_executor_) {
      held += slot.result_bytes;
      ++busy[slot.device];
    }
    std::vector<DeviceBacklog> backlog;
    backlog.reserve(waiting_.size());
    for (const auto& [device, jobs] : waiting_) {
      DeviceBacklog& b = backlog.emplace_back();
      b.busy = busy[device];
      const size_t room = static_cast<size_t>(std::max(limits.per_device - b.busy, 0));
      for (size_t k = 0; k < jobs.size() && k < room; ++k) {
        b.next_results.push_back(ResultBytes(jobs[k].job));
      }
    }
    const std::vector<size_t> plan = PlanDispatch(backlog, held, outbox_.bytes(), limits);
    size_t d = 0;
    for (auto it = waiting_.begin(); it != waiting_.end(); ++d) {
      auto& [device, jobs] = *it;
      for (size_t n = 0; n < plan[d]; ++n) {
        Waiting next = std::move(jobs.front());
        jobs.pop_front();
        --waiting_count_;
        waiting_bytes_ -= next.bytes;
        if (const absl::Status s = Submit(device, next); !s.ok()) {
          outbox_.Leave(/*was_running=*/false);
          Fail(next.id, s);
          refused = true;
        }
      }
      it = jobs.empty() ? waiting_.erase(it) : std::next(it);
    }
  }
}

absl::Status ProfilerService::BatchReactor::Submit(const std::string& device, Waiting& waiting) {
  // The job waited in this stream before it reached the device's queue: that is queue wait
  // too (the executor counts from its own queue on).
  const absl::Duration held = absl::Now() - waiting.received;
  kprof::worker::v1::WorkerRequest request;
  std::vector<const kprof::v1::FunctionCall*> calls;
  const bool time = waiting.job.has_time_evaluate();
  if (time) {
    *request.mutable_time_evaluate() = waiting.job.time_evaluate();
    calls.push_back(&waiting.job.time_evaluate().call());
    if (waiting.check != nullptr && !request.time_evaluate().has_check()) {
      *request.mutable_time_evaluate()->mutable_check() = *waiting.check;
    }
  } else {
    if (waiting.job.profile_function().collectors_size() > kMaxCollectors) {
      return absl::InvalidArgumentError(
          absl::StrCat(waiting.job.profile_function().collectors_size(), " collectors (limit ",
                       kMaxCollectors, ")"));
    }
    *request.mutable_profile_function() = waiting.job.profile_function();
    calls.push_back(&waiting.job.profile_function().call());
    if (waiting.check != nullptr && !request.profile_function().has_check()) {
      *request.mutable_profile_function()->mutable_check() = *waiting.check;
    }
  }
  absl::StatusOr<PreparedJob> job =
      service_->PrepareJob(client_, device, calls, std::move(request), /*options_checked=*/true);
  if (!job.ok()) return job.status();
  const bool leased = lease_.has_value() && lease_->device == job->executor->device();
  KPROF_ASSIGN_OR_RETURN(std::shared_ptr<PendingCheck> check,
                         service_->StartCheck(client_, *job, deadline_));
  const uint64_t job_id = job->request.job_id();
  DeviceExecutor* executor = job->executor;
  const std::string id = waiting.id;
  const std::string what = job->what;
  // Past the shared queue's bound if need be: this stream holds at most
  // kInExecutorPerDevice there, so a queue full of other clients' jobs delays it, never
  // fails it.
  const absl::Status submitted = executor->Submit(
      std::move(job->request), client_, deadline_,
      [this, job_id, id, what, time, held, check](
          absl::StatusOr<kprof::worker::v1::WorkerAnswer> result, JobTiming timing) {
        timing.queue_wait += held;
        absl::Status status = ResultStatus(result, what);
        if (!status.ok() && check != nullptr && result.ok()) {
          status = check->Failed(std::move(status), *result);
        }
        if (!status.ok() || check == nullptr) {
          Finished(job_id, id, status, result, timing, time);
          return;
        }
        check->Judge(std::move(*result), [this, job_id, id, time, timing](
                                             absl::Status judged,
                                             std::vector<kprof::v1::CheckVerdict> verdicts,
                                             kprof::worker::v1::WorkerAnswer answer) {
          if (judged.ok()) AppendVerdicts(verdicts, &answer);
          absl::StatusOr<kprof::worker::v1::WorkerAnswer> judged_result = std::move(answer);
          Finished(job_id, id, judged, judged_result, timing, time);
        });
      },
      std::move(job->pin), [this, job_id, id] { Started(job_id, id); },
      /*beyond_bound=*/true, std::move(job->module_fds), leased ? lease_->id : "");
  if (!submitted.ok()) return submitted;
  in_executor_[job_id] = InExecutor{id, device, executor, false, ResultBytes(waiting.job)};
  return absl::OkStatus();
}

void ProfilerService::BatchReactor::Started(uint64_t job_id, const std::string& id) {
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

void ProfilerService::BatchReactor::KickLater(DeviceExecutor* executor) {
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

void ProfilerService::BatchReactor::Finished(
    uint64_t job_id, const std::string& id, const absl::Status& status,
    absl::StatusOr<kprof::worker::v1::WorkerAnswer>& result, JobTiming timing, bool time) {
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

}  // namespace kprof::server

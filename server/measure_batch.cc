// MeasureBatch: many jobs on one bidirectional stream. Jobs wait in the stream's own queue, one
// per device at a time goes to the device's executor (the shared queue stays short, and other
// clients' jobs interleave), and each job's updates are written back as they happen.
#include <deque>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/grpc_status.h"
#include "server/profiler_service.h"

namespace kprof::server {
namespace {

using kprof::v1::BatchJob;
using kprof::v1::BatchUpdate;

constexpr size_t kMaxIdLength = 256;
// Jobs a stream may hold (waiting, running or with updates not yet written) before it stops
// reading: past this the client's writes wait on gRPC's flow control.
constexpr size_t kMaxOutstanding = 4096;
// Jobs of one stream handed to one device's executor at a time.
constexpr int kInExecutorPerDevice = 2;

}  // namespace

class ProfilerService::BatchReactor final
    : public grpc::ServerBidiReactor<kprof::v1::BatchRequest, BatchUpdate> {
 public:
  BatchReactor(ProfilerService* service, grpc::CallbackServerContext* context)
      : service_(service), deadline_(Deadline(context)) {}

  void Begin(const absl::Status& refused) {
    if (!refused.ok()) {
      Finish(ToGrpcStatus(refused));
      return;
    }
    StartRead(&incoming_);
  }

  void OnReadDone(bool ok) override {
    Actions actions;
    {
      absl::MutexLock lock(&mutex_);
      if (!ok) {
        reads_done_ = true;
      } else {
        for (BatchJob& job : *incoming_.mutable_jobs()) Accept(std::move(job));
        incoming_.Clear();
        if (Outstanding() < kMaxOutstanding) {
          actions.read = true;
        } else {
          read_paused_ = true;
        }
      }
      Pump(actions);
    }
    Run(actions);
  }

  void OnWriteDone(bool ok) override {
    Actions actions;
    {
      absl::MutexLock lock(&mutex_);
      writing_ = false;
      outbox_.pop_front();
      if (!ok) broken_ = true;  // the client is gone; OnCancel follows
      Pump(actions);
    }
    Run(actions);
  }

  void OnCancel() override {
    std::vector<std::pair<DeviceExecutor*, uint64_t>> running;
    {
      absl::MutexLock lock(&mutex_);
      cancelled_ = true;
      waiting_.clear();
      for (const auto& [job_id, slot] : in_executor_) running.emplace_back(slot.executor, job_id);
    }
    for (const auto& [executor, job_id] : running) executor->Cancel(job_id);
    bool finish = false;
    {
      absl::MutexLock lock(&mutex_);
      finish = !finished_;
      finished_ = true;
    }
    if (finish) Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    bool last = false;
    {
      absl::MutexLock lock(&mutex_);
      done_ = true;
      last = in_executor_.empty();
    }
    if (last) delete this;
  }

 private:
  // What to do once the lock is released: gRPC calls are never made under it.
  struct Actions {
    bool read = false;
    const BatchUpdate* write = nullptr;
    bool finish = false;
  };

  struct Waiting {
    std::string id;
    BatchJob job;
  };
  struct InExecutor {
    std::string id;
    std::string device;
    DeviceExecutor* executor = nullptr;
    bool running = false;
  };

  size_t Outstanding() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    size_t waiting = 0;
    for (const auto& [device, jobs] : waiting_) waiting += jobs.size();
    return waiting + in_executor_.size() + outbox_.size();
  }

  void Update(const std::string& id, BatchUpdate::State state, BatchUpdate update = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    update.set_id(id);
    update.set_state(state);
    switch (state) {
      case BatchUpdate::QUEUED:
        ++queued_;
        break;
      case BatchUpdate::RUNNING:
        --queued_;
        ++running_;
        break;
      case BatchUpdate::DONE:
      case BatchUpdate::FAILED:
        (state == BatchUpdate::DONE ? done_count_ : failed_count_) += 1;
        break;
      default:
        break;
    }
    kprof::v1::BatchProgress* progress = update.mutable_progress();
    progress->set_queued(queued_);
    progress->set_running(running_);
    progress->set_done(done_count_);
    progress->set_failed(failed_count_);
    if (!broken_ && !cancelled_) outbox_.push_back(std::move(update));
  }

  void Fail(const std::string& id, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    BatchUpdate update;
    update.set_code(static_cast<int32_t>(status.code()));
    update.set_message(std::string(status.message()));
    Update(id, BatchUpdate::FAILED, std::move(update));
  }

  // A job read from the stream: checked for an id, queued behind its device's others.
  void Accept(BatchJob job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    std::string id = job.id();
    if (id.empty() || id.size() > kMaxIdLength) {
      const std::string shown = id.empty() ? "" : id.substr(0, 64);
      Fail(shown, absl::InvalidArgumentError(absl::StrCat("a batch job's id is ", id.size(),
                                                          " bytes (accepted: 1 to ", kMaxIdLength,
                                                          ", unique within the stream)")));
      return;
    }
    if (!ids_.insert(id).second) {
      Fail(id, absl::InvalidArgumentError(absl::StrCat(
                   "job id '", id, "' is used twice in this stream (ids must be unique)")));
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
    const absl::StatusOr<core::Device> parsed =
        core::ParseDevice(device.empty() ? "cpu:0" : device);
    if (!parsed.ok()) {
      Fail(id, parsed.status());
      return;
    }
    Update(id, BatchUpdate::QUEUED);
    waiting_[core::DeviceSpec(*parsed)].push_back(Waiting{std::move(id), std::move(job)});
  }

  // Hands waiting jobs to executors, resumes reading, writes the next update, or finishes.
  void Pump(Actions& actions) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (!cancelled_) {
      for (auto& [device, jobs] : waiting_) {
        int busy = 0;
        for (const auto& [job_id, slot] : in_executor_) busy += slot.device == device;
        while (busy < kInExecutorPerDevice && !jobs.empty()) {
          Waiting next = std::move(jobs.front());
          jobs.pop_front();
          const absl::Status s = Dispatch(device, next);
          if (absl::IsResourceExhausted(s) && busy > 0) {
            jobs.push_front(std::move(next));  // the shared queue is full: wait for one of ours
            break;
          }
          if (!s.ok()) {
            --queued_;
            Fail(next.id, s);
            continue;
          }
          ++busy;
        }
      }
      if (read_paused_ && !reads_done_ && Outstanding() < kMaxOutstanding / 2) {
        read_paused_ = false;
        actions.read = true;
      }
    }
    if (!writing_ && !outbox_.empty() && !broken_ && !finished_) {
      writing_ = true;
      actions.write = &outbox_.front();
    }
    if (reads_done_ && !writing_ && outbox_.empty() && in_executor_.empty() && !finished_ &&
        Outstanding() == 0) {
      finished_ = true;
      actions.finish = true;
    }
  }

  void Run(const Actions& actions) {
    if (actions.read) StartRead(&incoming_);
    if (actions.write != nullptr) StartWrite(actions.write);
    if (actions.finish) Finish(grpc::Status::OK);
  }

  absl::Status Dispatch(const std::string& device, Waiting& waiting)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
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
    absl::StatusOr<PreparedJob> job = service_->PrepareJob(device, calls, std::move(request));
    if (!job.ok()) return job.status();
    const uint64_t job_id = job->request.job_id();
    DeviceExecutor* executor = job->executor;
    const std::string id = waiting.id;
    const std::string what = job->what;
    const absl::Status submitted = executor->Submit(
        std::move(job->request), deadline_,
        [this, job_id, id, what, time](absl::StatusOr<kprof::worker::v1::WorkerResponse> result,
                                       JobTiming timing) {
          Finished(job_id, id, ResultStatus(result, what), result, timing, time);
        },
        std::move(job->pin), [this, job_id, id] { Started(job_id, id); });
    if (!submitted.ok()) return submitted;
    in_executor_[job_id] = InExecutor{id, device, executor, false};
    return absl::OkStatus();
  }

  void Started(uint64_t job_id, const std::string& id) {
    Actions actions;
    {
      absl::MutexLock lock(&mutex_);
      const auto it = in_executor_.find(job_id);
      if (it == in_executor_.end() || cancelled_) return;
      it->second.running = true;
      Update(id, BatchUpdate::RUNNING);
      Pump(actions);
    }
    Run(actions);
  }

  void Finished(uint64_t job_id, const std::string& id, const absl::Status& status,
                absl::StatusOr<kprof::worker::v1::WorkerResponse>& result, JobTiming timing,
                bool time) {
    Actions actions;
    bool last = false;
    {
      absl::MutexLock lock(&mutex_);
      const auto it = in_executor_.find(job_id);
      const bool was_running = it != in_executor_.end() && it->second.running;
      if (it != in_executor_.end()) in_executor_.erase(it);
      (was_running ? running_ : queued_) -= 1;
      if (status.ok()) {
        BatchUpdate update;
        if (time) {
          kprof::v1::TimeEvaluateResponse* out = update.mutable_time_evaluate();
          *out = std::move(*result->mutable_time_evaluate());
          SetTiming(timing, out->mutable_timing());
        } else {
          kprof::v1::ProfileFunctionResponse* out = update.mutable_profile_function();
          *out = std::move(*result->mutable_profile_function());
          SetTiming(timing, out->mutable_timing());
        }
        Update(id, BatchUpdate::DONE, std::move(update));
      } else {
        Fail(id, status);
      }
      if (done_) {
        last = in_executor_.empty();
      } else {
        Pump(actions);
      }
    }
    if (last) {
      delete this;
      return;
    }
    Run(actions);
  }

  ProfilerService* const service_;
  const absl::Time deadline_;
  kprof::v1::BatchRequest incoming_;  // touched by the read in flight only

  absl::Mutex mutex_;
  std::set<std::string> ids_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, std::deque<Waiting>> waiting_ ABSL_GUARDED_BY(mutex_);  // by device
  std::map<uint64_t, InExecutor> in_executor_ ABSL_GUARDED_BY(mutex_);          // by job id
  std::deque<BatchUpdate> outbox_ ABSL_GUARDED_BY(mutex_);  // front: being written
  int64_t queued_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t running_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t done_count_ ABSL_GUARDED_BY(mutex_) = 0;
  int64_t failed_count_ ABSL_GUARDED_BY(mutex_) = 0;
  bool reads_done_ ABSL_GUARDED_BY(mutex_) = false;
  bool read_paused_ ABSL_GUARDED_BY(mutex_) = false;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  bool broken_ ABSL_GUARDED_BY(mutex_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  bool done_ ABSL_GUARDED_BY(mutex_) = false;
};

grpc::ServerBidiReactor<kprof::v1::BatchRequest, BatchUpdate>* ProfilerService::MeasureBatch(
    grpc::CallbackServerContext* context) {
  auto* reactor = new BatchReactor(this, context);
  reactor->Begin(Authenticate(context));
  return reactor;
}

}  // namespace kprof::server

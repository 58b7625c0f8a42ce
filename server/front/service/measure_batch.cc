// MeasureBatch, and its reactor's stream side: reads, writes, cancellation, Kick and the reactor's
// lifetime (batch_reactor.h).
#include <malloc.h>

#include <algorithm>
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
#include "server/front/modules/module_registry.h"
#include "server/front/service/batch_reactor.h"
#include "server/front/service/grpc_status.h"
#include "server/front/service/profiler_service.h"
#include "server/worker/job_options.h"

namespace kprof::server {

void ProfilerService::BatchReactor::Begin(const absl::Status& refused) {
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

bool ProfilerService::BatchReactor::Pin() {
  absl::MutexLock lock(&mutex_);
  if (Unused()) return false;  // its last user is on the way to Delete
  ++pins_;
  return true;
}

bool ProfilerService::BatchReactor::Ended() {
  absl::MutexLock lock(&mutex_);
  return cancelled_ || done_;
}

void ProfilerService::BatchReactor::Unpin() {
  bool last = false;
  {
    absl::MutexLock lock(&mutex_);
    --pins_;
    last = Unused();
  }
  if (last) Delete();
}

void ProfilerService::BatchReactor::Drain() {
  {
    absl::MutexLock lock(&mutex_);
    draining_ = true;
  }
  Kick();
}

void ProfilerService::BatchReactor::OnReadDone(bool ok) {
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
        if (incoming_.has_check()) {
          check_ =
              std::make_shared<const kprof::v1::AnswerCheck>(std::move(*incoming_.mutable_check()));
        }
        for (BatchJob& job : *incoming_.mutable_jobs()) Accept(std::move(job));
      }
      incoming_.Clear();
      want_read_ = true;
    }
  }
  Kick();
}

void ProfilerService::BatchReactor::OnWriteDone(bool ok) {
  {
    absl::MutexLock lock(&mutex_);
    writing_ = false;
    outbox_.Written(ok);
    if (!ok) broken_ = true;  // the client is gone; OnCancel follows
  }
  Kick();
}

void ProfilerService::BatchReactor::OnCancel() {
  std::vector<std::pair<DeviceExecutor*, uint64_t>> running;
  {
    absl::MutexLock lock(&mutex_);
    cancelled_ = true;
    running = StopAll();
  }
  for (const auto& [executor, job_id] : running) executor->Cancel(job_id);
  Kick();
}

void ProfilerService::BatchReactor::OnDone() {
  bool last = false;
  {
    absl::MutexLock lock(&mutex_);
    done_ = true;
    last = Unused();
  }
  if (last) Delete();
}

bool ProfilerService::BatchReactor::Unused() const {
  return done_ && in_executor_.empty() && !kicking_ && pins_ == 0;
}

void ProfilerService::BatchReactor::Delete() {
  service_->Unregister(this);
  delete this;
}

size_t ProfilerService::BatchReactor::Outstanding() const {
  return waiting_count_ + in_executor_.size() + outbox_.size() + outbox_.writing_count();
}

std::vector<std::pair<DeviceExecutor*, uint64_t>> ProfilerService::BatchReactor::StopAll() {
  waiting_.clear();
  waiting_count_ = 0;
  waiting_bytes_ = 0;
  std::vector<std::pair<DeviceExecutor*, uint64_t>> running;
  for (const auto& [job_id, slot] : in_executor_) running.emplace_back(slot.executor, job_id);
  return running;
}

void ProfilerService::BatchReactor::Protocol(const absl::Status& status) {
  if (error_.ok()) error_ = status;
  to_cancel_ = StopAll();
}

void ProfilerService::BatchReactor::Kick() {
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

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ProfilerService::MeasureBatch(
    grpc::CallbackServerContext* context) {
  absl::StatusOr<std::string> client = Authenticate(context);
  absl::Status admitted = client.status();
  std::optional<LeaseMark> lease;
  if (admitted.ok()) {
    absl::StatusOr<std::optional<LeaseMark>> carried = CheckLease(context, *client);
    if (carried.ok()) lease = *std::move(carried);
    admitted = carried.status();
  }
  auto* reactor = new BatchReactor(this, context, client.ok() ? *std::move(client) : "");
  reactor->set_lease(std::move(lease));
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
    // A stream its client cancelled counts no more, however long its jobs take to wind down:
    // a client that cancels one and opens the next is within its limit.
    if (admitted.ok() &&
        static_cast<size_t>(std::count_if(batches_.begin(), batches_.end(), [&](auto* open) {
          return open->client() == reactor->client() && !open->Ended();
        })) >= kMaxBatchStreamsPerClient) {
      admitted = absl::ResourceExhaustedError(absl::StrCat(
          "client '", reactor->client(), "' has ", kMaxBatchStreamsPerClient,
          " MeasureBatch streams open, as many as a client may: send these jobs on one of them, "
          "or when one ends"));
    }
    batches_.insert(reactor);
    ++uploads_;
  }
  reactor->Begin(admitted);
  return reactor;
}

void ProfilerService::Unregister(BatchReactor* reactor) {
  {
    absl::MutexLock lock(&uploads_mutex_);
    if (batches_.erase(reactor) > 0) --uploads_;
  }
  // What the stream's jobs and updates took goes back to the system, not only to malloc's free
  // lists (a batch of large jobs would leave the daemon hundreds of MiB larger).
  malloc_trim(0);
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

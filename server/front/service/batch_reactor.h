// ProfilerService::BatchReactor, MeasureBatch's: many jobs on one bidirectional stream. Jobs wait
// in the stream's own queue; one per device at a time goes to the device's executor (the shared
// queue stays short, and other clients' jobs interleave), and each job's updates are written back
// as they happen.
//
// Threads: gRPC's (reads, writes, cancellation) and the executors' (a job started or finished)
// all change the state under `mutex_`, then call Kick. Kick lets one thread at a time turn the
// state into gRPC operations, so no operation is ever started after Finish, and the reactor is
// deleted only once gRPC is done with it (OnDone), no executor holds one of its jobs, and no
// thread is inside Kick.
//
// The stream's side is in measure_batch.cc (reads, writes, Kick, its lifetime); its jobs' side
// in batch_jobs.cc (accepting them, handing them to executors, their answers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/alarm.h"
#include "grpcpp/support/byte_buffer.h"
#include "server/front/scheduling/device_executor.h"
#include "server/front/service/batch_outbox.h"
#include "server/front/service/profiler_service.h"

namespace kprof::server {

class ProfilerService::BatchReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  BatchReactor(ProfilerService* service, grpc::CallbackServerContext* context, std::string client)
      : service_(service), client_(std::move(client)), deadline_(Deadline(context)) {}
  // Who sent the stream ("" when it was refused before anyone was known).
  const std::string& client() const { return client_; }

  // The lease the stream was opened under: its jobs on that device run under it (and are
  // refused once it has ended). Before Begin.
  void set_lease(std::optional<LeaseMark> lease) { lease_ = std::move(lease); }

  // After the service has registered (or refused) the stream.
  void Begin(const absl::Status& refused);

  // Keeps the reactor from being deleted until Unpin; false when it is already being deleted.
  // Called under the service's lock, so that a reactor in its set is still there.
  bool Pin();
  // Whether the client cancelled the stream or gRPC is done with it: it no longer counts
  // against the client's streams, though its jobs may still be winding down. Called under the
  // service's lock, as Pin.
  bool Ended() ABSL_LOCKS_EXCLUDED(mutex_);

  void Unpin();

  // The daemon is shutting down: no more reading; the stream ends UNAVAILABLE once what it
  // holds is answered. On a pinned reactor.
  void Drain();

  void OnReadDone(bool ok) override;

  void OnWriteDone(bool ok) override;

  void OnCancel() override;

  void OnDone() override;

 private:
  using BatchJob = kprof::v1::BatchJob;
  using BatchUpdate = BatchOutbox::Update;

  static constexpr size_t kMaxIdLength = 256;
  // Jobs in one message, and in one stream: a client that wants more opens another stream.
  static constexpr int kMaxJobsPerMessage = 10'000;
  static constexpr uint64_t kMaxJobsPerStream = 1'000'000;
  // Jobs a stream may hold (waiting, running, or with updates not yet written) before it stops
  // reading: past this the client's writes wait on gRPC's flow control.
  static constexpr size_t kMaxOutstanding = 4096;
  // Jobs of one stream handed to one device's executor at a time: enough to keep its worker's
  // pipeline full (WorkerPool::pipeline_depth).
  static constexpr int kInExecutorPerDevice = 16;
  // Bytes a stream may hold in the front: of jobs waiting (past it, it stops reading), and of
  // updates its client has not read yet (past it, no further job goes to a device: a client that
  // reads slowly, or never, stalls its own stream, not the daemon's memory). A result of a
  // million repeats is some 9 MB; the jobs already with an executor may add theirs on top.
  static constexpr size_t kMaxHeldBytes = size_t{32} << 20;
  // BatchRequest.modules: the bytes of one at most (a message's are at most the daemon's largest
  // message, 16 MiB).
  static constexpr size_t kMaxInlineModuleBytes = size_t{4} << 20;

  // Two independent 64-bit hashes of an id: a stream remembers up to a million ids in 16 bytes
  // each, not in up to 256, and a false "used twice" needs both to collide.
  static std::pair<uint64_t, uint64_t> IdHash(const std::string& id);

  struct Waiting {
    std::string id;
    BatchJob job;
    absl::Time received;  // when the stream read it: its queue wait starts here
    // Its module, kept from eviction from the moment the stream accepted the job: a module
    // evicted under queued jobs would fail them all as unknown.
    std::shared_ptr<void> module_pin;
    size_t bytes = 0;  // of the job's message, counted in waiting_bytes_
    // The stream's check when the job came (BatchRequest.check), for a job without its own.
    std::shared_ptr<const kprof::v1::AnswerCheck> check;
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
  static size_t ResultBytes(const BatchJob& job);

  bool Unused() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  void Delete();

  size_t Outstanding() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Takes every waiting job away and says which are with executors, to cancel them.
  std::vector<std::pair<DeviceExecutor*, uint64_t>> StopAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // A client that breaks the protocol: the stream ends with `status`; its jobs are stopped.
  void Protocol(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  void Update(const std::string& id, BatchUpdate::State state, BatchUpdate update = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  void Fail(const std::string& id, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // A job read from the stream: checked, then queued behind its device's others. An id that
  // is missing, too long or used twice breaks the protocol (its answer could not be told from
  // another job's), and so ends the stream.
  void Accept(BatchJob job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // A module sent on the stream, checked and stored as LoadModule would.
  absl::Status StoreInline(const kprof::v1::InlineModule& module);

  // Hands waiting jobs to executors, up to kInExecutorPerDevice each, while the client keeps up
  // with reading the updates (PlanDispatch says how many).
  void Dispatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  // Lets one thread at a time turn the state into gRPC operations.
  void Kick();

  absl::Status Submit(const std::string& device, Waiting& waiting)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  void Started(uint64_t job_id, const std::string& id);

  // On an executor's thread: the updates of the answers it handles together go out together,
  // once it has handled them (DeviceExecutor::Defer), rather than a write each.
  void KickLater(DeviceExecutor* executor);

  void Finished(uint64_t job_id, const std::string& id, const absl::Status& status,
                absl::StatusOr<kprof::worker::v1::WorkerAnswer>& result, JobTiming timing,
                bool time);

  ProfilerService* const service_;
  const std::string client_;  // who sent the stream (ProfilerService::Authenticate)
  std::optional<LeaseMark> lease_;
  const absl::Time deadline_;
  std::shared_ptr<const kprof::v1::AnswerCheck> check_;  // BatchRequest.check, the latest
  grpc::ByteBuffer incoming_bytes_;                      // touched by the read in flight only
  kprof::v1::BatchRequest incoming_;                     // parsed from it, in OnReadDone
  BatchUpdate outgoing_;             // the next write's updates (BatchOutbox::TakeMessage)
  grpc::ByteBuffer outgoing_bytes_;  // the write in flight, serialized

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

}  // namespace kprof::server

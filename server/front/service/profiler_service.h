// ProfilerService: kprof.v1.Profiler on gRPC's callback API. Requests are checked in the front
// (device, modules, functions, limits) and measurements queued on the device's executor; no
// call blocks a gRPC thread while its job waits or runs.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "base/device.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "server/front/modules/module_registry.h"
#include "server/front/scheduling/device_executor.h"
#include "server/front/service/pending_check.h"
#include "server/front/service/reference_cache.h"
#include "server/front/service/token_auth.h"
#include "server/front/workers/worker_process.h"

namespace kprof::server {

class LeaseManager;

// The one client of a daemon that takes no credentials (loopback only): whoever reaches it
// can already run code as its user.
inline constexpr std::string_view kLocalClient = "local";

struct ServiceLimits {
  uint64_t max_argument_bytes = uint64_t{4} << 30;
  int max_queue = 64;
  absl::Duration job_timeout = absl::Seconds(60);
  absl::Duration upload_idle_timeout = absl::Seconds(30);  // an upload sending nothing is ended
  absl::Duration busy_poll = absl::ZeroDuration();         // WorkerOptions::busy_poll, for GetInfo
  // Measurements without a check of this level are refused (--require-checks); UNSPECIFIED:
  // none is required.
  kprof::v1::AnswerCheck::Level require_checks = kprof::v1::AnswerCheck::LEVEL_UNSPECIFIED;
};

// The callback service, but for MeasureBatch, whose messages the service parses itself: a
// BatchRequest that is not valid protobuf ends the stream INVALID_ARGUMENT (grpc++ would
// report it as the end of the client's writes, and the stream would end OK, unanswered); and
// TimeEvaluate, whose answer is the worker's serialised result with the front's fields appended
// (WorkerAnswer), never parsed and built again.
using ProfilerServiceBase = kprof::v1::Profiler::WithCallbackMethod_GetInfo<
    kprof::v1::Profiler::WithCallbackMethod_HasModule<
        kprof::v1::Profiler::WithCallbackMethod_LoadModule<
            kprof::v1::Profiler::WithCallbackMethod_ListModules<
                kprof::v1::Profiler::WithCallbackMethod_UnloadModule<
                    kprof::v1::Profiler::WithCallbackMethod_ProfileFunction<
                        kprof::v1::Profiler::WithRawCallbackMethod_TimeEvaluate<
                            kprof::v1::Profiler::WithCallbackMethod_Profile<
                                kprof::v1::Profiler::WithRawCallbackMethod_MeasureBatch<
                                    kprof::v1::Profiler::WithCallbackMethod_Lease<
                                        kprof::v1::Profiler::Service>>>>>>>>>>;

class ProfilerService final : public ProfilerServiceBase {
 public:
  // `auth`: when set, every call needs a bearer token it knows (the health service, separate,
  // never does).
  ProfilerService(ModuleRegistry* registry,
                  std::map<base::Device, std::unique_ptr<DeviceExecutor>>* executors,
                  ServiceLimits limits, std::optional<TokenAuth> auth = std::nullopt);
  ~ProfilerService() override;

  // The host's devices and collectors, described by a worker once before serving
  // (DescribeHost): GetInfo and jobs on cuda:N answer from it, and the daemon never loads
  // PAPI, the CUDA driver or NVML itself. A part the worker could not describe is reported
  // with the reason.
  void SetHost(DescribedHost host);

  // The tokens calls need, or null when they need none.
  const TokenAuth* auth() const { return auth_.has_value() ? &*auth_ : nullptr; }

  // MeasureBatch streams open now, for the metrics.
  int open_batch_streams() ABSL_LOCKS_EXCLUDED(uploads_mutex_);
  // The device leases (not owned; they outlive the service's calls), for Lease, GetInfo and the
  // lease id a call carries. Before serving; without, Lease is UNIMPLEMENTED.
  void set_leases(LeaseManager* leases) { leases_ = leases; }
  // Where the metrics are served, for GetInfo ("" without them). Before serving.
  void set_metrics_address(std::string address) { metrics_address_ = std::move(address); }

  // From now on, measurements, uploads and batch streams are refused with UNAVAILABLE; open
  // batch streams stop reading and end once what they hold is answered.
  void StartDraining();

  // Waits up to `timeout` for the uploads and batch streams in progress to end; false when
  // some still run. Then
  // the server can be shut down at once: gRPC's Shutdown otherwise waits out its whole deadline
  // for every idle client connection.
  bool WaitForUploads(absl::Duration timeout);

  grpc::ServerUnaryReactor* GetInfo(grpc::CallbackServerContext* context,
                                    const kprof::v1::GetInfoRequest* request,
                                    kprof::v1::GetInfoResponse* response) override;
  grpc::ServerUnaryReactor* HasModule(grpc::CallbackServerContext* context,
                                      const kprof::v1::HasModuleRequest* request,
                                      kprof::v1::HasModuleResponse* response) override;
  grpc::ServerReadReactor<kprof::v1::LoadModuleRequest>* LoadModule(
      grpc::CallbackServerContext* context, kprof::v1::LoadModuleResponse* response) override;
  grpc::ServerUnaryReactor* ListModules(grpc::CallbackServerContext* context,
                                        const kprof::v1::ListModulesRequest* request,
                                        kprof::v1::ListModulesResponse* response) override;
  grpc::ServerUnaryReactor* UnloadModule(grpc::CallbackServerContext* context,
                                         const kprof::v1::UnloadModuleRequest* request,
                                         kprof::v1::UnloadModuleResponse* response) override;
  grpc::ServerUnaryReactor* TimeEvaluate(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ProfileFunction(grpc::CallbackServerContext* context,
                                            const kprof::v1::ProfileFunctionRequest* request,
                                            kprof::v1::ProfileFunctionResponse* response) override;
  grpc::ServerUnaryReactor* Profile(grpc::CallbackServerContext* context,
                                    const kprof::v1::ProfileRequest* request,
                                    kprof::v1::ProfileResponse* response) override;
  // In measure_batch.cc: BatchRequest in, BatchUpdate out, as bytes.
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* MeasureBatch(
      grpc::CallbackServerContext* context) override;
  // In lease_calls.cc.
  grpc::ServerBidiReactor<kprof::v1::LeaseRequest, kprof::v1::LeaseUpdate>* Lease(
      grpc::CallbackServerContext* context) override;

 private:
  class UploadReactor;
  class BatchReactor;
  class LeaseReactor;
  // The lease a call carries (metadata kprof-lease), which must be `client`'s and held
  // (LeaseManager::CheckLeaseId): its id and device; none for a call without one. A job on that
  // device runs under it (DeviceExecutor::Submit's lease_id).
  struct LeaseMark {
    std::string id;
    base::Device device;
  };
  absl::StatusOr<std::optional<LeaseMark>> CheckLease(const grpc::CallbackServerContext* context,
                                                      const std::string& client) const;

  static constexpr int kMaxCollectors = 16;
  static constexpr size_t kMaxBatchStreams = 64;
  // A client's at once: each holds up to 2 x BatchReactor::kMaxHeldBytes of its jobs and
  // updates, so a client holds 256 MiB of the daemon's memory at most, however many it opens.
  static constexpr size_t kMaxBatchStreamsPerClient = 4;
  static constexpr int64_t kMaxProfileRows = 100'000;

  // The executor of `device_text` ("" is cpu:0); NOT_FOUND or FAILED_PRECONDITION (a GPU the
  // driver does not show) naming the devices there are.
  absl::StatusOr<DeviceExecutor*> FindExecutor(const std::string& device_text);
  void Unregister(BatchReactor* reactor);

  static void SetTiming(const JobTiming& timing, kprof::v1::JobTiming* out);
  // A serialised result with its `timing` (field `field`) appended.
  static void AppendTiming(const JobTiming& timing, int field, std::string* result);

  // Who the caller is (see TokenAuth): a token's label, a client certificate's subject, or
  // kLocalClient; UNAUTHENTICATED when the daemon wants a token the call lacks.
  absl::StatusOr<std::string> Authenticate(const grpc::CallbackServerContext* context) const;
  // A reactor already finished with UNAUTHENTICATED, or nullptr when the call may proceed
  // (`client` then names the caller).
  grpc::ServerUnaryReactor* Refuse(grpc::CallbackServerContext* context, std::string* client) const;

  // A measurement checked and ready for its device's executor: the modules it names (which
  // `client` must hold) are pinned (by `pin`) and listed in `request`, which has its job id.
  struct PreparedJob {
    DeviceExecutor* executor = nullptr;
    std::shared_ptr<void> pin;
    std::vector<int> module_fds;  // the modules' files for the worker, owned by `pin`
    kprof::worker::v1::WorkerRequest request;
    std::string what;  // "function 'f'", for messages
  };
  // `options_checked`: the request's options were checked already (a batch checks a job's when
  // the stream takes it).
  absl::StatusOr<PreparedJob> PrepareJob(const std::string& client, const std::string& device_text,
                                         const std::vector<const kprof::v1::FunctionCall*>& calls,
                                         kprof::worker::v1::WorkerRequest request,
                                         bool options_checked = false);
  // The job's outcome as a status: the worker's code, or how the worker failed.
  static absl::Status ResultStatus(const absl::StatusOr<kprof::worker::v1::WorkerAnswer>& result,
                                   const std::string& what);
  // One page of the modules `client` holds (ListModules; GetInfo's first page).
  absl::Status ListPage(const std::string& client, const kprof::v1::ListModulesRequest& request,
                        kprof::v1::ListModulesResponse* response);
  // The call's deadline for its job: a little before the client's (see the definition).
  static absl::Time Deadline(const grpc::CallbackServerContext* context);

  // Checked measurements (check_calls.cc). A checked call of a request: its check, the call,
  // its data's seed, and its index in a profile's calls (-1 for the job's one call).
  struct CheckedCall {
    const kprof::v1::AnswerCheck* check;
    const kprof::v1::FunctionCall* call;
    uint64_t seed;
    int index;
  };
  // The request's checked calls, in call order (none for an unchecked job).
  static std::vector<CheckedCall> CheckedCallsOf(const kprof::worker::v1::WorkerRequest& request);
  // For a job whose request has checks: makes their plans, takes the checks out of the request
  // (the candidate's worker never sees them) and asks for the checked calls' arguments back, and
  // queues each reference's run unless its data are held or running. A null pointer for a job
  // without one. INVALID_ARGUMENT for a bad check (or more checks than a profile's calls).
  // FAILED_PRECONDITION for a job whose checks are short of --require-checks.
  absl::Status RequiredChecks(const kprof::worker::v1::WorkerRequest& request,
                              const std::vector<CheckedCall>& calls) const;
  absl::StatusOr<std::shared_ptr<PendingCheck>> StartCheck(const std::string& client,
                                                           PreparedJob& job, absl::Time deadline);
  // Queues a reference's run (a ReferenceJob) in a worker apart from the client's; its end
  // finishes `key` in references_.
  absl::Status RunReference(const std::string& client, const std::string& key,
                            kprof::worker::v1::WorkerRequest request, absl::Time deadline,
                            bool keep = true);
  // StartCheck's for a strict check (`part`, whose reference runs as `reference` on each
  // checked call's seed): the candidate's worker asked for strict checks.
  absl::StatusOr<std::shared_ptr<PendingCheck>> StartStrictCheck(
      const std::string& client, PendingCheck::Part part, kprof::worker::v1::ReferenceJob reference,
      PreparedJob& job, absl::Time deadline);
  // Adds the passed verdicts to the result the worker wrote (as fields appended to its bytes).
  static void AppendVerdicts(const std::vector<kprof::v1::CheckVerdict>& verdicts,
                             kprof::worker::v1::WorkerAnswer* answer);

  // Checks and queues one measurement; `fill` puts the worker's result into the response, false
  // when it is not a valid message of its type (answered INTERNAL).
  using Fill = std::function<bool(kprof::worker::v1::WorkerAnswer&, JobTiming)>;
  grpc::ServerUnaryReactor* Submit(grpc::CallbackServerContext* context, const std::string& client,
                                   const std::string& device_text,
                                   const std::vector<const kprof::v1::FunctionCall*>& calls,
                                   kprof::worker::v1::WorkerRequest request, Fill fill);

  ModuleRegistry* registry_;
  LeaseManager* leases_ = nullptr;
  std::string metrics_address_;
  std::map<base::Device, std::unique_ptr<DeviceExecutor>>* executors_;
  const ServiceLimits limits_;
  const std::optional<TokenAuth> auth_;
  std::atomic<bool> draining_{false};
  std::map<std::string, kprof::v1::DeviceInfo> devices_;              // by "cpu:0", "cuda:1"
  std::string cuda_line_;                                             // GetInfoResponse.cuda
  std::string isolation_;                                             // GetInfoResponse.isolation
  std::string cuda_unavailable_ = "CUDA devices were not looked up";  // or "" when there are
  // The bytes of each client's calls (TimeEvaluate, ProfileFunction, Profile) from their
  // arrival to their answer: expected data ride along, up to 16 MiB a message.
  static constexpr size_t kMaxCallBytes = size_t{64} << 20;
  // A hold on `bytes` of `client`'s, given back when the last copy goes; RESOURCE_EXHAUSTED
  // past kMaxCallBytes.
  absl::StatusOr<std::shared_ptr<void>> HoldCallBytes(const std::string& client, size_t bytes)
      ABSL_LOCKS_EXCLUDED(calls_mutex_);
  absl::Mutex calls_mutex_;
  std::map<std::string, size_t> call_bytes_ ABSL_GUARDED_BY(calls_mutex_);

  absl::Mutex uploads_mutex_;
  int uploads_ ABSL_GUARDED_BY(uploads_mutex_) = 0;  // uploads and batch streams
  std::set<BatchReactor*> batches_ ABSL_GUARDED_BY(uploads_mutex_);
  std::atomic<uint64_t> next_job_id_{1};
  ReferenceCache references_;
  std::set<UploadReactor*> live_uploads_ ABSL_GUARDED_BY(uploads_mutex_);
  // Ends uploads idle for limits_.upload_idle_timeout, and gives the memory a big upload went
  // through back to the system.
  void SweepIdleUploads();
  absl::Notification stop_sweeping_;
  std::thread sweeper_;
  std::atomic<uint64_t> upload_bytes_in_flight_{0};  // declared sizes of uploads in progress
  std::atomic<uint64_t> uploaded_since_trim_{0};     // chunk bytes received since malloc_trim
};

}  // namespace kprof::server

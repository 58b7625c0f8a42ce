#include "server/front/service/profiler_service.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/byte_size.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "core/collectors/rusage_collector.h"
#include "core/host/placement.h"
#include "core/host/platform.h"
#include "core/modules/builtin_module.h"
#include "core/modules/module_format.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"
#include "kprof/config.h"
#include "proto/status.h"
#include "server/front/scheduling/lease_manager.h"
#include "server/front/service/grpc_status.h"
#include "server/ipc/frame_channel.h"
#include "server/ipc/wire.h"
#include "server/worker/job_options.h"

namespace kprof::server {

namespace {

// Limits on what one request may carry, each refused with INVALID_ARGUMENT saying so.
constexpr size_t kMaxNameLength = 256;
constexpr int kMaxArguments = 256;
constexpr size_t kMaxSpecLength = 1024;
constexpr size_t kMaxCalls = 4096;

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

void ProfilerService::SetTiming(const JobTiming& timing, kprof::v1::JobTiming* out) {
  out->set_queue_wait_seconds(Seconds(timing.queue_wait));
  out->set_execution_seconds(Seconds(timing.execution));
  out->set_sequence(timing.sequence);
}

void ProfilerService::AppendTiming(const JobTiming& timing, int field, std::string* result) {
  kprof::v1::JobTiming proto;
  SetTiming(timing, &proto);
  AppendField(field, proto, result);
}

ProfilerService::ProfilerService(ModuleRegistry* registry,
                                 std::map<base::Device, std::unique_ptr<DeviceExecutor>>* executors,
                                 ServiceLimits limits, std::optional<TokenAuth> auth)
    : registry_(registry), executors_(executors), limits_(limits), auth_(std::move(auth)) {
  sweeper_ = std::thread([this] { SweepIdleUploads(); });
}

ProfilerService::~ProfilerService() {
  stop_sweeping_.Notify();
  sweeper_.join();
}

absl::StatusOr<std::string> ProfilerService::Authenticate(
    const grpc::CallbackServerContext* context) const {
  if (auth_.has_value()) {
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    if (it == metadata.end()) return auth_->Check(nullptr);
    const std::string_view value(it->second.data(), it->second.size());
    return auth_->Check(&value);
  }
  // Without tokens: the subject of a verified client certificate (mutual TLS), or "local",
  // one client for whoever reaches a loopback-only daemon.
  if (const std::shared_ptr<const grpc::AuthContext> auth = context->auth_context();
      auth != nullptr && auth->IsPeerAuthenticated()) {
    for (const grpc::string_ref& subject :
         auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME)) {
      if (subject.size() == 0) continue;
      // A client's name is its queue's key, which a control character (NUL above all) could
      // make another's (DeviceExecutor::LeaseKey): none is taken.
      if (std::any_of(subject.begin(), subject.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
        return absl::UnauthenticatedError(
            "the client certificate's subject holds control characters; it names no client");
      }
      return std::string(subject.data(), subject.size());
    }
    return absl::UnauthenticatedError("the client certificate has no subject to name it by");
  }
  return std::string(kLocalClient);
}

grpc::ServerUnaryReactor* ProfilerService::Refuse(grpc::CallbackServerContext* context,
                                                  std::string* client) const {
  absl::StatusOr<std::string> who = Authenticate(context);
  if (who.ok()) {
    *client = *std::move(who);
    return nullptr;
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(who.status()));
  return reactor;
}

// The reactor of a measurement: a client that cancels or goes away takes its job out of the
// queue, or stops it while it runs.
//
// Once it is finished its reactions are trivial (OnDone deletes it; OnCancel has nothing left to
// stop), so gRPC may run them in the thread that finishes it: otherwise every call's OnDone is
// handed to gRPC's executor thread, a wake-up and some 15 us of CPU per unary call that a health
// check does not pay (InternalInlineable, which gRPC's own trivial reactors use).
class JobReactor final : public grpc::ServerUnaryReactor {
 public:
  void Watch(DeviceExecutor* executor, uint64_t job_id) {
    executor_ = executor;
    job_id_ = job_id;
  }
  // Hides ServerUnaryReactor::Finish, which is not virtual: every answer goes through here.
  void Finish(grpc::Status status) {
    finished_.store(true, std::memory_order_release);
    grpc::ServerUnaryReactor::Finish(std::move(status));
  }
  bool InternalInlineable() override { return finished_.load(std::memory_order_acquire); }
  void OnCancel() override {
    if (executor_ != nullptr && !finished_.load(std::memory_order_acquire)) {
      executor_->Cancel(job_id_);
    }
  }
  void OnDone() override { delete this; }

 private:
  DeviceExecutor* executor_ = nullptr;
  uint64_t job_id_ = 0;
  std::atomic<bool> finished_{false};
};

absl::Status CheckCall(const kprof::v1::FunctionCall& call) {
  if (call.function().size() > kMaxNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("function name of ", call.function().size(),
                                                   " bytes (limit ", kMaxNameLength, ")"));
  }
  if (call.args_size() > kMaxArguments) {
    return absl::InvalidArgumentError(
        absl::StrCat(call.args_size(), " arguments (limit ", kMaxArguments, ")"));
  }
  for (const std::string& spec : call.args()) {
    if (spec.size() > kMaxSpecLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("an argument spec of ", spec.size(), " bytes (limit ", kMaxSpecLength, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceExecutor*> ProfilerService::FindExecutor(const std::string& device_text) {
  KPROF_ASSIGN_OR_RETURN(const base::Device device,
                         base::ParseDevice(device_text.empty() ? "cpu:0" : device_text));
  const auto executor = executors_->find(device);
  if (executor != executors_->end()) return executor->second.get();
  std::vector<std::string> present;
  for (const auto& entry : *executors_) present.push_back(base::DeviceSpec(entry.first));
  const std::string known = absl::StrJoin(present, ", ");
  if (device.type == base::DeviceType::kCuda) {
    const std::string why =
        cuda_unavailable_.empty() ? "the CUDA driver reports no such device" : cuda_unavailable_;
    return absl::FailedPreconditionError(absl::StrCat("device ", base::DeviceSpec(device),
                                                      " is not available: ", why,
                                                      " (devices here: ", known, ")"));
  }
  return absl::NotFoundError(
      absl::StrCat("unknown device ", base::DeviceSpec(device), " (devices here: ", known, ")"));
}

absl::StatusOr<ProfilerService::PreparedJob> ProfilerService::PrepareJob(
    const std::string& client, const std::string& device_text,
    const std::vector<const kprof::v1::FunctionCall*>& calls,
    kprof::worker::v1::WorkerRequest request, bool options_checked) {
  if (draining_) return absl::UnavailableError("kprofd is shutting down");
  KPROF_ASSIGN_OR_RETURN(DeviceExecutor* const executor, FindExecutor(device_text));
  const base::Device device = executor->device();
  if (calls.empty()) return absl::InvalidArgumentError("the request names no function");
  if (calls.size() > kMaxCalls) {
    return absl::InvalidArgumentError(
        absl::StrCat("a profile of ", calls.size(), " calls (limit ", kMaxCalls, ")"));
  }
  for (const kprof::v1::FunctionCall* call : calls) KPROF_RETURN_IF_ERROR(CheckCall(*call));
  // The options as the worker will read them: a bad request is refused before it waits.
  request.set_max_argument_bytes(limits_.max_argument_bytes);
  // The device's peaks, for a time evaluation's throughput (set once, before serving).
  if (const auto it = devices_.find(base::DeviceSpec(device));
      request.has_time_evaluate() && it != devices_.end()) {
    request.set_memory_bandwidth(it->second.peak_bandwidth_gbps() * 1e9);
    request.set_cache_bandwidth(it->second.cache_bandwidth_gbps() * 1e9);
  }
  if (!options_checked) KPROF_RETURN_IF_ERROR(CheckJobOptions(request, device));

  std::vector<std::string> ids;
  for (const kprof::v1::FunctionCall* call : calls) {
    if (call->module_id().empty()) {
      return absl::InvalidArgumentError(
          "a call without a module id (a SHA-256 from LoadModule, or \"builtin\")");
    }
    if (call->module_id() == core::kBuiltinModuleName) {
      KPROF_RETURN_IF_ERROR(core::BuiltinModule().GetFunction(call->function()).status());
    } else if (std::find(ids.begin(), ids.end(), call->module_id()) == ids.end()) {
      ids.push_back(call->module_id());  // each module once, however many calls name it
    }
  }
  std::vector<StoredModule> modules;
  if (ids.size() > FrameChannel::kMaxFds) {
    return absl::InvalidArgumentError(
        absl::StrCat("the job uses ", ids.size(), " modules (limit ", FrameChannel::kMaxFds, ")"));
  }
  KPROF_ASSIGN_OR_RETURN(std::shared_ptr<ModuleRegistry::Pin> pin,
                         registry_->Acquire(client, ids, &modules));
  for (const kprof::v1::FunctionCall* call : calls) {
    if (call->module_id() == core::kBuiltinModuleName) continue;
    const StoredModule& module = modules[static_cast<size_t>(
        std::find(ids.begin(), ids.end(), call->module_id()) - ids.begin())];
    // CUDA code runs on CUDA devices; shared libraries run on the host for any device (on a
    // GPU they get device pointers and launch work themselves).
    if (core::IsCudaFormat(module.format) && device.type != base::DeviceType::kCuda) {
      return absl::InvalidArgumentError(
          absl::StrCat("module ", module.id, " (", module.name, ") is ", module.format,
                       " code for a CUDA device; the job is for ", base::DeviceSpec(device)));
    }
    // A fatbin's kernels are known once a device loads it.
    if (module.format != "fatbin" &&
        !std::binary_search(module.functions.begin(), module.functions.end(), call->function())) {
      return core::NoSuchFunction(call->function(), module.functions);
    }
  }
  for (const StoredModule& module : modules) {
    kprof::worker::v1::ModuleFile* file = request.add_modules();
    file->set_id(module.id);
    file->set_path(module.path);  // for messages: the worker reads the descriptor
    file->set_format(module.format);
  }
  request.set_job_id(next_job_id_++);
  PreparedJob job;
  job.executor = executor;
  job.module_fds = pin->fds();
  job.pin = std::move(pin);
  job.request = std::move(request);
  job.what = calls.size() == 1 ? absl::StrCat("function '", calls[0]->function(), "'")
                               : "the profiled sequence";
  return job;
}

absl::Status ProfilerService::ResultStatus(
    const absl::StatusOr<kprof::worker::v1::WorkerAnswer>& result, const std::string& what) {
  if (!result.ok()) {
    if (absl::IsAborted(result.status())) {
      return absl::AbortedError(absl::StrCat(what, " crashed: ", result.status().message()));
    }
    return result.status();
  }
  return wire::StatusFromWire(result->code(), result->message());
}

absl::Time ProfilerService::Deadline(const grpc::CallbackServerContext* context) {
  if (context->deadline() == std::chrono::system_clock::time_point::max()) {
    return absl::InfiniteFuture();
  }
  // A little before the client's own: the daemon stops the job and says why while the client
  // still listens (a tenth of the time left, half a second at most), rather than the client
  // giving up at the same moment with a bare "Deadline Exceeded".
  const absl::Time deadline = absl::FromChrono(context->deadline());
  return deadline - std::min(absl::Milliseconds(500), (deadline - absl::Now()) / 10);
}

grpc::ServerUnaryReactor* ProfilerService::Submit(
    grpc::CallbackServerContext* context, const std::string& client, const std::string& device_text,
    const std::vector<const kprof::v1::FunctionCall*>& calls,
    kprof::worker::v1::WorkerRequest request, Fill fill) {
  auto* reactor = new JobReactor();
  absl::StatusOr<std::shared_ptr<void>> held = HoldCallBytes(client, request.ByteSizeLong());
  const absl::StatusOr<std::optional<LeaseMark>> lease =
      held.ok() ? CheckLease(context, client) : held.status();
  if (!lease.ok()) {
    reactor->Finish(ToGrpcStatus(lease.status()));
    return reactor;
  }
  absl::StatusOr<PreparedJob> job = PrepareJob(client, device_text, calls, std::move(request));
  if (!job.ok()) {
    reactor->Finish(ToGrpcStatus(job.status()));
    return reactor;
  }
  const bool leased = lease->has_value() && (*lease)->device == job->executor->device();
  absl::StatusOr<std::shared_ptr<PendingCheck>> check = StartCheck(client, *job, Deadline(context));
  if (!check.ok()) {
    reactor->Finish(ToGrpcStatus(check.status()));
    return reactor;
  }
  reactor->Watch(job->executor, job->request.job_id());
  // The reply, once the result (and with a check, its verdict) is there.
  auto reply = [reactor, fill, what = job->what](kprof::worker::v1::WorkerAnswer& answer,
                                                 JobTiming timing) {
    absl::Status status = absl::OkStatus();
    if (!fill(answer, timing)) {
      status = absl::InternalError(
          absl::StrCat("the worker's result for ", what, " is not a valid message"));
    }
    reactor->Finish(ToGrpcStatus(status));
  };
  const absl::Status submitted = job->executor->Submit(
      std::move(job->request), client, Deadline(context),
      [reactor, reply, check = *std::move(check), what = job->what, held = *std::move(held)](
          absl::StatusOr<kprof::worker::v1::WorkerAnswer> result, JobTiming timing) {
        absl::Status status = ResultStatus(result, what);
        if (!status.ok() && check != nullptr && result.ok()) {
          status = check->Failed(std::move(status), *result);
        }
        if (!status.ok()) {
          reactor->Finish(ToGrpcStatus(status));
        } else if (check == nullptr) {
          reply(*result, timing);
        } else {
          check->Judge(std::move(*result),
                       [reactor, reply, timing, held](absl::Status judged,
                                                      std::vector<kprof::v1::CheckVerdict> verdicts,
                                                      kprof::worker::v1::WorkerAnswer answer) {
                         if (!judged.ok()) {
                           reactor->Finish(ToGrpcStatus(judged));
                           return;
                         }
                         AppendVerdicts(verdicts, &answer);
                         reply(answer, timing);
                       });
        }
      },
      std::move(job->pin), nullptr, false, std::move(job->module_fds), leased ? (*lease)->id : "");
  if (!submitted.ok()) reactor->Finish(ToGrpcStatus(submitted));
  return reactor;
}

grpc::ServerUnaryReactor* ProfilerService::TimeEvaluate(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  std::string client;
  if (auto* refused = Refuse(context, &client)) return refused;
  kprof::v1::TimeEvaluateRequest parsed;
  grpc::ByteBuffer bytes(*request);  // shares the slices
  if (!grpc::SerializationTraits<kprof::v1::TimeEvaluateRequest>::Deserialize(&bytes, &parsed)
           .ok()) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        "the request to /kprof.v1.Profiler/TimeEvaluate is not a valid protobuf message of its "
        "type"));
    return reactor;
  }
  kprof::worker::v1::WorkerRequest job;
  *job.mutable_time_evaluate() = parsed;
  return Submit(context, client, parsed.device(), {&parsed.call()}, std::move(job),
                [response](kprof::worker::v1::WorkerAnswer& result, JobTiming timing) {
                  std::string answer = std::move(*result.mutable_time_evaluate());
                  AppendTiming(timing, kprof::v1::TimeEvaluateResponse::kTimingFieldNumber,
                               &answer);
                  grpc::Slice slice(answer);
                  *response = grpc::ByteBuffer(&slice, 1);
                  return true;  // passed on as the worker wrote it
                });
}

grpc::ServerUnaryReactor* ProfilerService::ProfileFunction(
    grpc::CallbackServerContext* context, const kprof::v1::ProfileFunctionRequest* request,
    kprof::v1::ProfileFunctionResponse* response) {
  std::string client;
  if (auto* refused = Refuse(context, &client)) return refused;
  kprof::worker::v1::WorkerRequest job;
  if (request->collectors_size() > kMaxCollectors) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat(request->collectors_size(), " collectors (limit ", kMaxCollectors, ")"))));
    return reactor;
  }
  *job.mutable_profile_function() = *request;
  return Submit(context, client, request->device(), {&request->call()}, std::move(job),
                [response](kprof::worker::v1::WorkerAnswer& result, JobTiming timing) {
                  if (!response->ParseFromString(result.profile_function())) return false;
                  SetTiming(timing, response->mutable_timing());
                  return true;
                });
}

grpc::ServerUnaryReactor* ProfilerService::Profile(grpc::CallbackServerContext* context,
                                                   const kprof::v1::ProfileRequest* request,
                                                   kprof::v1::ProfileResponse* response) {
  std::string client;
  if (auto* refused = Refuse(context, &client)) return refused;
  // A row per call per repeat, each with its metrics: bounded before the worker builds them.
  const int64_t repeat = request->has_repeat() ? request->repeat() : 1;
  if (repeat > 0 && request->calls_size() > 0 && repeat > kMaxProfileRows / request->calls_size()) {
    auto* reactor = context->DefaultReactor();
    reactor->Finish(ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "a profile of ", request->calls_size(), " call(s) x ", repeat, " repeats would be over ",
        kMaxProfileRows,
        " report rows (one per call per repeat); ask for fewer repeats, or profile in parts"))));
    return reactor;
  }
  kprof::worker::v1::WorkerRequest job;
  *job.mutable_profile() = *request;
  std::vector<const kprof::v1::FunctionCall*> calls;
  for (const auto& call : request->calls()) calls.push_back(&call);
  return Submit(context, client, request->device(), calls, std::move(job),
                [response](kprof::worker::v1::WorkerAnswer& result, JobTiming timing) {
                  if (!response->ParseFromString(result.profile())) return false;
                  SetTiming(timing, response->mutable_timing());
                  return true;
                });
}

absl::StatusOr<std::shared_ptr<void>> ProfilerService::HoldCallBytes(const std::string& client,
                                                                     size_t bytes) {
  absl::MutexLock lock(&calls_mutex_);
  size_t& held = call_bytes_[client];
  if (held > 0 && held + bytes > kMaxCallBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "client '", client, "' has ", base::FormatByteSize(held),
        " of calls waiting or running, and this one's ", base::FormatByteSize(bytes),
        " would pass ", base::FormatByteSize(kMaxCallBytes), " a client; retry as they end"));
  }
  held += bytes;
  return std::shared_ptr<void>(nullptr, [this, client, bytes](void*) {
    absl::MutexLock released(&calls_mutex_);
    const auto found = call_bytes_.find(client);
    if (found == call_bytes_.end()) return;
    found->second -= std::min(found->second, bytes);
    if (found->second == 0) call_bytes_.erase(found);
  });
}

int ProfilerService::open_batch_streams() {
  absl::MutexLock lock(&uploads_mutex_);
  return static_cast<int>(batches_.size());
}

}  // namespace kprof::server

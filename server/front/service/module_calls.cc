#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "core/collectors/rusage_collector.h"
#include "core/host/placement.h"
#include "core/modules/builtin_module.h"
#include "core/modules/module_format.h"
#include "grpc/grpc_security_constants.h"
#include "grpcpp/security/auth_context.h"
#include "kprof/config.h"
#include "proto/status.h"
#include "server/front/service/grpc_status.h"
#include "server/front/service/profiler_service.h"
#include "server/ipc/frame_channel.h"
#include "server/ipc/wire.h"
#include "server/worker/job_options.h"

// ProfilerService's module calls: HasModule, LoadModule (its upload reactor), ListModules and
// UnloadModule.
namespace kprof::server {

namespace {

using kprof::v1::ModuleInfo;

constexpr uint64_t kTrimAfterBytes = 16 << 20;

void ToProto(const StoredModule& module, ModuleInfo* out) {
  out->set_id(module.id);
  out->set_name(module.name);
  out->set_format(module.format);
  out->set_size_bytes(module.size_bytes);
  for (const std::string& f : module.functions) out->add_functions(f);
}

void BuiltinInfo(ModuleInfo* out) {
  out->set_id(std::string(core::kBuiltinModuleName));
  out->set_name(std::string(core::kBuiltinModuleName));
  out->set_format("builtin");
  for (const std::string& f : core::BuiltinModule().functions()) out->add_functions(f);
}

}  // namespace

// LoadModule: a header, then chunks; the SHA-256 is computed and the bytes written to a file in
// the cache as they arrive. An upload that sends nothing for --upload-idle-timeout is ended.
class ProfilerService::UploadReactor final
    : public grpc::ServerReadReactor<kprof::v1::LoadModuleRequest> {
 public:
  // An admitted upload was counted in `uploads_` and listed in `live_uploads_` by the service,
  // and leaves both when it ends.
  UploadReactor(ProfilerService* service, kprof::v1::LoadModuleResponse* response,
                const absl::StatusOr<std::string>& admitted)
      : service_(service),
        registry_(service->registry_),
        client_(admitted.ok() ? *admitted : std::string()),
        response_(response),
        admitted_(admitted.ok()) {
    Touch();
    if (!admitted.ok()) {
      FinishOnce(admitted.status());
      return;
    }
    Read();
  }

  void OnReadDone(bool ok) override {
    Touch();
    {
      absl::MutexLock lock(&finish_mutex_);
      reading_ = false;
      if (finished_) return;  // ended meanwhile (idle): the read failed with it
    }
    if (!ok) {
      Complete();
      return;
    }
    if (const absl::Status s = Take(); !s.ok()) {
      FinishOnce(s);
      return;
    }
    Read();
  }

  void OnDone() override {
    if (admitted_) {
      absl::MutexLock lock(&service_->uploads_mutex_);
      --service_->uploads_;
      service_->live_uploads_.erase(this);
    }
    service_->upload_bytes_in_flight_.fetch_sub(reserved_);
    Unref();
  }

  // For the service's sweeper (which holds a reference meanwhile): ends the upload if it has
  // waited on a read for `timeout` — only then: a callback at work (a chunk taken, the module
  // stored) is not interrupted, and no read is started after the end.
  void ExpireIfIdle(absl::Duration timeout) {
    const absl::Duration idle =
        absl::Now() - absl::FromUnixNanos(last_activity_.load(std::memory_order_relaxed));
    if (idle < timeout) return;
    {
      absl::MutexLock lock(&finish_mutex_);
      if (!reading_ || finished_) return;
      finished_ = true;
    }
    Finish(ToGrpcStatus(absl::DeadlineExceededError(absl::StrCat(
        "the upload sent nothing for ", absl::FormatDuration(idle), " (--upload-idle-timeout ",
        absl::FormatDuration(timeout), ") and was dropped; send the module again"))));
  }
  void Ref() { refs_.fetch_add(1); }
  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

 private:
  void Touch() { last_activity_.store(absl::ToUnixNanos(absl::Now()), std::memory_order_relaxed); }
  // The next read; from here until it is done, the sweeper may end the upload.
  void Read() {
    Touch();
    {
      absl::MutexLock lock(&finish_mutex_);
      if (finished_) return;
      reading_ = true;
    }
    StartRead(&message_);
  }
  void FinishOnce(const absl::Status& status) {
    {
      absl::MutexLock lock(&finish_mutex_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(ToGrpcStatus(status));
  }

  absl::Status Take() {
    if (message_.has_header()) {
      if (have_header_) return absl::InvalidArgumentError("an upload has one header, not two");
      header_ = message_.header();
      have_header_ = true;
      KPROF_RETURN_IF_ERROR(registry_->CheckHeader(header_.name(), header_.format(),
                                                   header_.size_bytes(), header_.sha256()));
      // Every upload in flight together within a bound (of the cache's disk), reserved by the
      // declared size (which the upload may not exceed).
      const uint64_t size = header_.size_bytes();
      const uint64_t max = 4 * registry_->options().max_module_bytes;
      const uint64_t before = service_->upload_bytes_in_flight_.fetch_add(size);
      if (before + size > max) {
        service_->upload_bytes_in_flight_.fetch_sub(size);
        return absl::ResourceExhaustedError(
            absl::StrCat("uploads in progress hold ", before, " bytes; this one's ", size,
                         " would pass the limit of ", max,
                         " (4 x --max-module-bytes); retry when one has ended"));
      }
      reserved_ = size;
      KPROF_ASSIGN_OR_RETURN(upload_, registry_->BeginUpload());
      return absl::OkStatus();
    }
    if (!have_header_) {
      return absl::InvalidArgumentError("an upload starts with its header, then its chunks");
    }
    const std::string& chunk = message_.chunk();
    if (upload_->size() + chunk.size() > header_.size_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("upload is longer than its declared size of ",
                                                     header_.size_bytes(), " bytes"));
    }
    hash_.Update(chunk);
    service_->uploaded_since_trim_.fetch_add(chunk.size(), std::memory_order_relaxed);
    return upload_->Append(chunk);
  }

  void Complete() {
    if (!have_header_) {
      FinishOnce(absl::InvalidArgumentError("upload ended before its header"));
      return;
    }
    const std::string hex = hash_.HexDigest();
    auto stored = registry_->Store(client_, header_.name(), header_.format(), *upload_,
                                   header_.size_bytes(), header_.sha256(), hex);
    upload_.reset();
    if (!stored.ok()) {
      FinishOnce(stored.status());
      return;
    }
    ToProto(stored->module, response_->mutable_module());
    response_->set_already_held(stored->already_held);
    FinishOnce(absl::OkStatus());
  }

  ProfilerService* const service_;
  ModuleRegistry* const registry_;
  uint64_t reserved_ = 0;     // this upload's part of the bytes in flight
  const std::string client_;  // who uploads: the module's new holder
  kprof::v1::LoadModuleResponse* response_;
  const bool admitted_;
  std::atomic<int> refs_{1};  // gRPC's, until OnDone; the sweeper's while it looks
  std::atomic<int64_t> last_activity_{0};
  absl::Mutex finish_mutex_;
  bool finished_ ABSL_GUARDED_BY(finish_mutex_) = false;
  bool reading_ ABSL_GUARDED_BY(finish_mutex_) = false;  // a read is outstanding
  base::Sha256 hash_;
  kprof::v1::LoadModuleRequest message_;
  kprof::v1::ModuleHeader header_;
  bool have_header_ = false;
  std::unique_ptr<ModuleRegistry::Upload> upload_;
};

absl::Status ProfilerService::ListPage(const std::string& client,
                                       const kprof::v1::ListModulesRequest& request,
                                       kprof::v1::ListModulesResponse* response) {
  constexpr int kMaxPage = 1000;
  constexpr size_t kMaxPageBytes = size_t{4} << 20;
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size = ", request.page_size(),
                                                   " (accepted: 1 to ", kMaxPage, ", or 0 for ",
                                                   kMaxPage, ")"));
  }
  const std::string& token = request.page_token();
  if (!token.empty() &&
      !(token.size() == 64 && token.find_first_not_of("0123456789abcdef") == std::string::npos)) {
    return absl::InvalidArgumentError(
        "page_token is not one a ListModules answer gave (its next_page_token)");
  }
  const size_t page = request.page_size() == 0 || request.page_size() > kMaxPage
                          ? kMaxPage
                          : static_cast<size_t>(request.page_size());
  // The token is the last id listed; after the builtin module alone, 64 zeros (before every
  // SHA-256 but one).
  const std::string after_builtin(64, '0');
  if (token.empty()) BuiltinInfo(response->add_modules());
  bool more = false;
  std::vector<StoredModule> modules;
  if (token.empty() && page == 1) {
    bool beyond = false;
    more = !registry_->List(client, "", 1, kMaxPageBytes, &beyond).empty();
  } else {
    modules = registry_->List(client, token, token.empty() ? page - 1 : page, kMaxPageBytes, &more);
  }
  for (const StoredModule& m : modules) ToProto(m, response->add_modules());
  if (more) response->set_next_page_token(modules.empty() ? after_builtin : modules.back().id);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ProfilerService::HasModule(grpc::CallbackServerContext* context,
                                                     const kprof::v1::HasModuleRequest* request,
                                                     kprof::v1::HasModuleResponse* response) {
  std::string client;
  if (auto* refused = Refuse(context, &client)) return refused;
  if (request->id() == core::kBuiltinModuleName) {
    response->set_present(true);
    BuiltinInfo(response->mutable_module());
  } else if (auto found = registry_->Find(client, request->id()); found.ok()) {
    response->set_present(true);
    ToProto(*found, response->mutable_module());
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerReadReactor<kprof::v1::LoadModuleRequest>* ProfilerService::LoadModule(
    grpc::CallbackServerContext* context, kprof::v1::LoadModuleResponse* response) {
  absl::StatusOr<std::string> admitted = Authenticate(context);
  if (admitted.ok()) {
    // Checked and counted under one lock, which StartDraining takes too: an upload either
    // counts before draining begins, and is waited for, or is refused.
    absl::MutexLock lock(&uploads_mutex_);
    if (draining_) {
      admitted = absl::UnavailableError("kprofd is shutting down");
    } else {
      ++uploads_;
    }
  }
  auto* reactor = new UploadReactor(this, response, admitted);
  if (admitted.ok()) {
    absl::MutexLock lock(&uploads_mutex_);
    live_uploads_.insert(reactor);
  }
  return reactor;
}

void ProfilerService::SweepIdleUploads() {
  const absl::Duration every = std::min(limits_.upload_idle_timeout / 4, absl::Seconds(1));
  while (!stop_sweeping_.WaitForNotificationWithTimeout(every)) {
    std::vector<UploadReactor*> live;
    {
      absl::MutexLock lock(&uploads_mutex_);
      for (UploadReactor* upload : live_uploads_) {
        upload->Ref();  // kept alive while looked at, even if it ends meanwhile
        live.push_back(upload);
      }
    }
    for (UploadReactor* upload : live) {
      upload->ExpireIfIdle(limits_.upload_idle_timeout);
      upload->Unref();
    }
    // gRPC reads a big upload through many buffers on several threads; glibc keeps what they
    // freed in its per-thread arenas, tens of MiB after a few hundred MiB, and gives it back only
    // when asked.
    if (uploaded_since_trim_.load(std::memory_order_relaxed) >= kTrimAfterBytes) {
      uploaded_since_trim_.store(0, std::memory_order_relaxed);
      malloc_trim(0);
    }
  }
}

bool ProfilerService::WaitForUploads(absl::Duration timeout) {
  absl::MutexLock lock(&uploads_mutex_);
  const auto none = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(uploads_mutex_) { return uploads_ == 0; };
  return uploads_mutex_.AwaitWithTimeout(absl::Condition(&none), timeout);
}

grpc::ServerUnaryReactor* ProfilerService::ListModules(grpc::CallbackServerContext* context,
                                                       const kprof::v1::ListModulesRequest* request,
                                                       kprof::v1::ListModulesResponse* response) {
  std::string client;
  if (auto* refused = Refuse(context, &client)) return refused;
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(ListPage(client, *request, response)));
  return reactor;
}

grpc::ServerUnaryReactor* ProfilerService::UnloadModule(
    grpc::CallbackServerContext* context, const kprof::v1::UnloadModuleRequest* request,
    kprof::v1::UnloadModuleResponse*) {
  std::string client;
  if (auto* refused = Refuse(context, &client)) return refused;
  auto* reactor = context->DefaultReactor();
  if (request->id() == core::kBuiltinModuleName) {
    reactor->Finish(ToGrpcStatus(
        absl::FailedPreconditionError("the builtin module is part of kprofd and stays")));
  } else {
    reactor->Finish(ToGrpcStatus(registry_->Unload(client, request->id())));
  }
  return reactor;
}

}  // namespace kprof::server

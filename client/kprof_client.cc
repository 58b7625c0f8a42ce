#include "client/kprof_client.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/loopback.h"
#include "base/read_file.h"
#include "base/sha256.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/status.h"

namespace kprof::client {
namespace {

// Modules from this size up are copied for Remember on a thread of their own.
constexpr size_t kParallelCopyBytes = size_t{4} << 20;

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return wire::StatusFromRichStatus(static_cast<int32_t>(status.error_code()),
                                    status.error_message(), status.error_details());
}

absl::Status StatusOf(const kprof::v1::BatchUpdate& update) {
  return wire::StatusFromWire(update.code(), update.message(), update.details());
}

std::string ModuleId(std::string_view bytes) { return base::Sha256Hex(bytes); }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& target,
                                                        const ClientOptions& options) {
  if (target.empty()) return absl::InvalidArgumentError("no target (HOST:PORT) given");
  ClientOptions with_lease = options;
  if (with_lease.lease.empty()) {
    // A lease is one daemon's: sent to the daemon it came from alone.
    // Compared as addresses: "ipv4:10.0.0.1:9177" (a farm's spelling) is "10.0.0.1:9177".
    const auto address = [](absl::string_view t) {
      for (absl::string_view scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
        if (absl::ConsumePrefix(&t, scheme)) break;
      }
      return std::string(t);
    };
    const char* lease = std::getenv("KPROF_LEASE");
    const char* leased = std::getenv("KPROF_LEASE_TARGET");
    if (lease != nullptr && leased != nullptr && address(target) == address(leased)) {
      with_lease.lease = lease;
    }
  }
  const bool tls =
      options.tls || !options.tls_root_certs_pem.empty() || !options.tls_cert_chain_pem.empty();
  const bool loopback = base::IsLoopbackAddress(target);
  if (!options.bearer_token.empty() && !tls && !loopback) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to send a bearer token in clear to ", target,
                     ": use TLS (--tls-ca FILE) beyond loopback"));
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(64 << 20);
  if (options.keepalive > absl::ZeroDuration()) {
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(options.keepalive));
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
    arguments.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms);
    arguments.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // a long job sends nothing
  }
  if (options.health_check) {
    // gRPC's client-side health checking (the daemon's grpc.health.v1 service, watched): a
    // daemon that says NOT_SERVING (draining) takes no new calls from this channel. It needs a
    // load-balancing policy other than pick_first.
    arguments.SetServiceConfigJSON(
        R"({"loadBalancingConfig": [{"round_robin": {}}],)"
        R"( "healthCheckConfig": {"serviceName": "kprof.v1.Profiler"}})");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs_pem;
    ssl.pem_cert_chain = options.tls_cert_chain_pem;
    ssl.pem_private_key = options.tls_private_key_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  auto channel = grpc::CreateCustomChannel(target, credentials, arguments);
  return std::unique_ptr<Client>(new Client(kprof::v1::Profiler::NewStub(channel), with_lease));
}

void Client::Prepare(grpc::ClientContext* context, absl::Duration timeout) const {
  const absl::Duration d = timeout > absl::ZeroDuration() ? timeout : options_.timeout;
  context->set_deadline(absl::ToChronoTime(absl::Now() + d));
  if (!options_.bearer_token.empty()) {
    context->AddMetadata("authorization", "Bearer " + options_.bearer_token);
  }
  if (!options_.lease.empty()) context->AddMetadata("kprof-lease", options_.lease);
}

absl::StatusOr<kprof::v1::GetInfoResponse> Client::Info(absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  kprof::v1::GetInfoResponse response;
  if (auto s = FromGrpcStatus(stub_->GetInfo(&context, {}, &response)); !s.ok()) return s;
  return response;
}

absl::StatusOr<bool> Client::HasModule(const std::string& id) {
  grpc::ClientContext context;
  Prepare(&context, {});
  kprof::v1::HasModuleRequest request;
  request.set_id(id);
  kprof::v1::HasModuleResponse response;
  if (auto s = FromGrpcStatus(stub_->HasModule(&context, request, &response)); !s.ok()) return s;
  return response.present();
}

absl::StatusOr<std::vector<kprof::v1::ModuleInfo>> Client::ListModules() {
  std::vector<kprof::v1::ModuleInfo> modules;
  kprof::v1::ListModulesRequest request;
  do {
    grpc::ClientContext context;
    Prepare(&context, {});
    kprof::v1::ListModulesResponse response;
    if (auto s = FromGrpcStatus(stub_->ListModules(&context, request, &response)); !s.ok()) {
      return s;
    }
    for (kprof::v1::ModuleInfo& m : *response.mutable_modules()) modules.push_back(std::move(m));
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return modules;
}

absl::Status Client::UnloadModule(const std::string& id) {
  grpc::ClientContext context;
  Prepare(&context, {});
  kprof::v1::UnloadModuleRequest request;
  request.set_id(id);
  kprof::v1::UnloadModuleResponse response;
  return FromGrpcStatus(stub_->UnloadModule(&context, request, &response));
}

absl::StatusOr<kprof::v1::ModuleInfo> Client::Upload(std::string_view bytes, const std::string& id,
                                                     const std::string& name,
                                                     const std::string& format) {
  grpc::ClientContext context;
  Prepare(&context, {});
  kprof::v1::LoadModuleResponse response;
  auto writer = stub_->LoadModule(&context, &response);
  kprof::v1::LoadModuleRequest header;
  header.mutable_header()->set_name(name);
  header.mutable_header()->set_format(format);
  header.mutable_header()->set_size_bytes(bytes.size());
  header.mutable_header()->set_sha256(id);
  bool open = writer->Write(header);
  for (size_t offset = 0; open && offset < bytes.size(); offset += options_.chunk_bytes) {
    kprof::v1::LoadModuleRequest chunk;
    const std::string_view part = bytes.substr(offset, options_.chunk_bytes);
    chunk.set_chunk(part.data(), part.size());
    open = writer->Write(chunk);  // false: the daemon already answered (an error)
  }
  writer->WritesDone();
  if (auto s = FromGrpcStatus(writer->Finish()); !s.ok()) return s;
  return response.module();
}

absl::StatusOr<kprof::v1::ModuleInfo> Client::LoadModule(std::string_view bytes,
                                                         const std::string& name,
                                                         const std::string& format) {
  return LoadModule(bytes, name, format, nullptr);
}

absl::StatusOr<kprof::v1::ModuleInfo> Client::LoadModule(std::string_view bytes,
                                                         const std::string& name,
                                                         const std::string& format,
                                                         std::string* owned) {
  // The copy kept for uploading again (Remember) is made on another thread while this one
  // hashes: for a large module, both passes over the bytes cost the time of the hash alone.
  std::shared_ptr<const KeptBytes> copy;
  std::thread copier;
  if (owned == nullptr && bytes.size() >= kParallelCopyBytes &&
      bytes.size() <= options_.max_remembered_bytes) {
    copier = std::thread([&copy, bytes] { copy = KeptBytes::Copy(bytes); });
  }
  const std::string id = ModuleId(bytes);
  if (copier.joinable()) copier.join();
  kprof::v1::HasModuleResponse response;
  if (bytes.size() > options_.upload_without_asking_bytes) {
    grpc::ClientContext context;
    Prepare(&context, {});
    kprof::v1::HasModuleRequest request;
    request.set_id(id);
    if (auto s = FromGrpcStatus(stub_->HasModule(&context, request, &response)); !s.ok()) {
      return s;
    }
  }
  if (!response.present()) {
    auto uploaded = Upload(bytes, id, name, format);
    if (!uploaded.ok()) return uploaded.status();
    *response.mutable_module() = *uploaded;
  }
  Remember(id, bytes, name, format, owned, std::move(copy));
  return response.module();
}

std::shared_ptr<const Client::KeptBytes> Client::KeptBytes::Copy(std::string_view bytes) {
  std::shared_ptr<KeptBytes> kept(new KeptBytes);
  if (bytes.size() >= kParallelCopyBytes) {
    void* map = mmap(nullptr, bytes.size(), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (map != MAP_FAILED) {
      kept->map_ = static_cast<char*>(map);
      kept->size_ = bytes.size();
      std::memcpy(kept->map_, bytes.data(), bytes.size());
      return kept;
    }
  }
  kept->text_.assign(bytes.data(), bytes.size());
  return kept;
}

std::shared_ptr<const Client::KeptBytes> Client::KeptBytes::Own(std::string bytes) {
  std::shared_ptr<KeptBytes> kept(new KeptBytes);
  kept->text_ = std::move(bytes);
  return kept;
}

Client::KeptBytes::~KeptBytes() {
  if (map_ != nullptr) munmap(map_, size_);
}

void Client::Remember(const std::string& id, std::string_view bytes, const std::string& name,
                      const std::string& format, std::string* owned,
                      std::shared_ptr<const KeptBytes> kept) {
  absl::MutexLock lock(&mutex_);
  if (auto it = uploaded_.find(id); it != uploaded_.end()) {
    it->second.order = next_order_++;
    return;
  }
  remembered_bytes_ += bytes.size();
  if (kept == nullptr) {
    kept = owned != nullptr ? KeptBytes::Own(std::move(*owned)) : KeptBytes::Copy(bytes);
  }
  uploaded_[id] = Uploaded{std::move(kept), name, format, next_order_++};
  while (remembered_bytes_ > options_.max_remembered_bytes && uploaded_.size() > 1) {
    auto oldest = uploaded_.begin();
    for (auto it = uploaded_.begin(); it != uploaded_.end(); ++it) {
      if (it->second.order < oldest->second.order) oldest = it;
    }
    remembered_bytes_ -= oldest->second.bytes->view().size();
    uploaded_.erase(oldest);
  }
}

absl::StatusOr<kprof::v1::ModuleInfo> Client::LoadModuleFile(const std::string& path,
                                                             const std::string& format) {
  // Read, not mapped: a file truncated under a mapping would end this process with SIGBUS.
  absl::StatusOr<std::string> bytes = base::ReadFile(path, "module file");
  if (!bytes.ok()) return bytes.status();
  return LoadModule(*bytes, path.substr(path.rfind('/') + 1), format, &*bytes);
}

std::vector<kprof::v1::BatchUpdate> Unpack(kprof::v1::BatchUpdate message) {
  std::vector<kprof::v1::BatchUpdate> updates;
  updates.reserve(1 + static_cast<size_t>(message.more_size()));
  google::protobuf::RepeatedPtrField<kprof::v1::BatchUpdate> more;
  more.Swap(message.mutable_more());
  updates.push_back(std::move(message));
  for (kprof::v1::BatchUpdate& update : more) updates.push_back(std::move(update));
  return updates;
}

absl::Status Client::Reupload(const std::string& id) {
  Uploaded module;
  {
    absl::MutexLock lock(&mutex_);
    const auto it = uploaded_.find(id);
    if (it == uploaded_.end()) return absl::NotFoundError("this client never uploaded " + id);
    module = it->second;
  }
  return Upload(module.bytes->view(), id, module.name, module.format).status();
}

template <typename Response, typename Call>
absl::StatusOr<Response> Client::WithReupload(Call call) {
  Response response;
  absl::Status status = call(&response);
  const std::string id = wire::MissingModule(status);
  if (id.empty()) {
    if (!status.ok()) return status;
    return response;
  }
  // Upload it again if this client has its bytes, then retry once.
  {
    absl::MutexLock lock(&mutex_);
    if (uploaded_.find(id) == uploaded_.end()) return status;
  }
  if (absl::Status uploaded = Reupload(id); !uploaded.ok()) return uploaded;
  response.Clear();
  status = call(&response);
  if (!status.ok()) return status;
  return response;
}

absl::StatusOr<kprof::v1::TimeEvaluateResponse> Client::TimeEvaluate(
    const kprof::v1::TimeEvaluateRequest& request, absl::Duration timeout) {
  return WithReupload<kprof::v1::TimeEvaluateResponse>(
      [&](kprof::v1::TimeEvaluateResponse* response) {
        grpc::ClientContext context;
        Prepare(&context, timeout);
        return FromGrpcStatus(stub_->TimeEvaluate(&context, request, response));
      });
}

absl::StatusOr<kprof::v1::ProfileFunctionResponse> Client::ProfileFunction(
    const kprof::v1::ProfileFunctionRequest& request, absl::Duration timeout) {
  return WithReupload<kprof::v1::ProfileFunctionResponse>(
      [&](kprof::v1::ProfileFunctionResponse* response) {
        grpc::ClientContext context;
        Prepare(&context, timeout);
        return FromGrpcStatus(stub_->ProfileFunction(&context, request, response));
      });
}

absl::StatusOr<kprof::v1::ProfileResponse> Client::Profile(const kprof::v1::ProfileRequest& request,
                                                           absl::Duration timeout) {
  return WithReupload<kprof::v1::ProfileResponse>([&](kprof::v1::ProfileResponse* response) {
    grpc::ClientContext context;
    Prepare(&context, timeout);
    return FromGrpcStatus(stub_->Profile(&context, request, response));
  });
}

std::unique_ptr<Client::LeaseStream> Client::OpenLease() {
  auto lease = std::make_unique<LeaseStream>();
  Prepare(&lease->context, {});
  lease->context.set_deadline(std::chrono::system_clock::time_point::max());
  lease->stream = stub_->Lease(&lease->context);
  return lease;
}

std::unique_ptr<Client::BatchStream> Client::OpenBatch() {
  auto batch = std::make_unique<BatchStream>();
  Prepare(&batch->context, {});
  batch->context.set_deadline(std::chrono::system_clock::time_point::max());
  batch->stream = stub_->MeasureBatch(&batch->context);
  return batch;
}

absl::Status Client::MeasureBatch(
    const std::vector<kprof::v1::BatchJob>& jobs,
    const std::function<void(const kprof::v1::BatchUpdate&)>& on_update, absl::Duration timeout,
    size_t jobs_per_message) {
  grpc::ClientContext context;
  Prepare(&context, timeout);
  // A batch runs as long as its jobs do: no deadline unless asked for.
  if (timeout <= absl::ZeroDuration()) {
    context.set_deadline(std::chrono::system_clock::time_point::max());
  }
  std::shared_ptr<grpc::ClientReaderWriter<kprof::v1::BatchRequest, kprof::v1::BatchUpdate>>
      stream = stub_->MeasureBatch(&context);
  const size_t per_message = std::max<size_t>(jobs_per_message, 1);
  // The writer keeps the stream open until every job has its answer: a job whose module the
  // daemon evicted before the job arrived is sent again once the module is uploaded again.
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<size_t> resend;  // guarded by mutex, and so are the two below
  bool reads_over = false;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) index.emplace(jobs[i].id(), i);
  size_t unanswered = index.size();
  std::thread writer([&] {
    kprof::v1::BatchRequest message;
    message.set_updates_per_message(kUpdatesPerMessage);
    size_t bytes = 0;
    bool open = true;
    for (size_t i = 0; open && i < jobs.size(); ++i) {
      *message.add_jobs() = jobs[i];
      bytes += jobs[i].ByteSizeLong();
      // Well under the daemon's 16 MiB message limit, however large the jobs.
      if (message.jobs_size() == static_cast<int>(per_message) || bytes > (4 << 20) ||
          i + 1 == jobs.size()) {
        open = stream->Write(message);  // false: the stream ended; Finish says why
        message.Clear();
        bytes = 0;
      }
    }
    std::unique_lock<std::mutex> lock(mutex);
    while (open) {
      wake.wait(lock, [&] { return !resend.empty() || reads_over || unanswered == 0; });
      if (resend.empty()) break;
      kprof::v1::BatchRequest again;
      *again.add_jobs() = jobs[resend.front()];
      resend.pop_front();
      lock.unlock();
      open = stream->Write(again);
      lock.lock();
    }
    lock.unlock();
    stream->WritesDone();
  });
  std::map<std::string, int> resent;
  kprof::v1::BatchUpdate message;
  while (stream->Read(&message)) {
    for (const kprof::v1::BatchUpdate& update : Unpack(std::move(message))) {
      const bool final = update.state() == kprof::v1::BatchUpdate::DONE ||
                         update.state() == kprof::v1::BatchUpdate::FAILED;
      const auto job = index.find(update.id());
      if (final && job != index.end() && update.state() == kprof::v1::BatchUpdate::FAILED) {
        const std::string module = wire::MissingModule(StatusOf(update));
        if (!module.empty() && resent[update.id()] < kMaxResends && Reupload(module).ok()) {
          ++resent[update.id()];
          std::lock_guard<std::mutex> lock(mutex);
          resend.push_back(job->second);
          wake.notify_one();
          continue;
        }
      }
      if (final && job != index.end()) {
        std::lock_guard<std::mutex> lock(mutex);
        if (unanswered > 0) --unanswered;
        wake.notify_one();
      }
      on_update(update);
    }
    message.Clear();
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    reads_over = true;
    wake.notify_one();
  }
  // Reads end once the daemon has sent its status; the writer's next Write then fails at once,
  // so it is never left blocked (and cancelling here would replace the daemon's status).
  writer.join();
  return FromGrpcStatus(stream->Finish());
}

}  // namespace kprof::client

// libkprof_client: the C++ API of a kprofd, over its gRPC stub.
//
// Modules are uploaded only when the daemon lacks their bytes, and again when a job finds that
// the daemon evicted them. Errors are absl::Status carrying the daemon's code and message.
//
//   KPROF_ASSIGN_OR_RETURN(auto client, Client::Connect("gpu-host:9177"));
//   KPROF_ASSIGN_OR_RETURN(auto module, client->LoadModuleFile("kernels.so"));
//   kprof::v1::TimeEvaluateRequest request;
//   request.mutable_call()->set_module_id(module.id());
//   request.mutable_call()->set_function("gemm");
//   KPROF_ASSIGN_OR_RETURN(auto timing, client->TimeEvaluate(request));
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "kprof/v1/kprof.grpc.pb.h"
#include "proto/status.h"  // IWYU pragma: export (wire::MissingModule)

namespace kprof::client {

struct ClientOptions {
  // The deadline of calls that do not give their own.
  absl::Duration timeout = absl::Seconds(60);
  // Upload chunk size.
  size_t chunk_bytes = 1 << 20;
  // Modules up to this size are uploaded without asking HasModule first: the daemon keeps
  // bytes it holds once anyway, and one call is cheaper than two (an autotuner's candidates are
  // mostly new).
  size_t upload_without_asking_bytes = 256 << 10;
  // Bytes of uploaded modules remembered for uploading again after an eviction; the oldest are
  // forgotten beyond this (an autotuner uploads thousands).
  uint64_t max_remembered_bytes = uint64_t{256} << 20;
  // Watch the daemon's health service and send nothing while it is not serving (a farm's
  // channels do).
  bool health_check = false;
  // While a call is open, a ping after this long without traffic, and the channel given up
  // when its answer takes as long again: a frozen daemon (stopped, its host gone) fails the
  // calls it holds as UNAVAILABLE instead of leaving them waiting. Zero: no pings.
  absl::Duration keepalive = absl::Seconds(20);
  // Sent as "authorization: Bearer <token>" on every call when not empty.
  std::string bearer_token;
  // A lease this client's calls are made under (sent as metadata "kprof-lease"): the daemon
  // refuses them once it has ended. Empty: $KPROF_LEASE when the target is
  // $KPROF_LEASE_TARGET, as `kprof lease` sets them for the command it runs.
  std::string lease;
  // TLS, when any is set: the CA that signed the daemon's certificate (PEM; empty: the
  // system's roots), and for mutual TLS this client's certificate chain and key (PEM).
  bool tls = false;
  std::string tls_root_certs_pem;
  std::string tls_cert_chain_pem;
  std::string tls_private_key_pem;
};

class Client {
 public:
  // A client of the daemon at `target` ("host:port"). Connects lazily: the first call says
  // whether the daemon is there (UNAVAILABLE).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& target,
                                                         const ClientOptions& options = {});

  // `timeout` 0: the client's own.
  absl::StatusOr<kprof::v1::GetInfoResponse> Info(absl::Duration timeout = absl::ZeroDuration());
  absl::StatusOr<bool> HasModule(const std::string& id);
  absl::StatusOr<std::vector<kprof::v1::ModuleInfo>> ListModules();
  absl::Status UnloadModule(const std::string& id);

  // Makes the daemon hold `bytes` (uploading them only when it lacks them) and returns what it
  // holds. The client remembers the bytes (a copy, the first time), to upload them again should
  // the daemon evict them; bytes it remembers already cost a hash and a question, no copy.
  absl::StatusOr<kprof::v1::ModuleInfo> LoadModule(std::string_view bytes, const std::string& name,
                                                   const std::string& format = "auto");
  absl::StatusOr<kprof::v1::ModuleInfo> LoadModuleFile(const std::string& path,
                                                       const std::string& format = "auto");

  // The measurements. `timeout` 0 means ClientOptions::timeout.
  absl::StatusOr<kprof::v1::TimeEvaluateResponse> TimeEvaluate(
      const kprof::v1::TimeEvaluateRequest& request, absl::Duration timeout = {});
  absl::StatusOr<kprof::v1::ProfileFunctionResponse> ProfileFunction(
      const kprof::v1::ProfileFunctionRequest& request, absl::Duration timeout = {});
  absl::StatusOr<kprof::v1::ProfileResponse> Profile(const kprof::v1::ProfileRequest& request,
                                                     absl::Duration timeout = {});

  // Sends `jobs` on one MeasureBatch stream (a writer thread sends them in messages of
  // `jobs_per_message` while this thread reads) and calls `on_update` with each update as it
  // arrives, in this thread. Jobs' own failures come as FAILED updates; the status is the
  // stream's (OK once every job has its result). A job refused because the daemon evicted its
  // module (one this client uploaded) is sent again after the module, up to three times, on
  // the same stream: the stream stays open until every job has its answer. `timeout` 0: no
  // deadline on the stream.
  absl::Status MeasureBatch(const std::vector<kprof::v1::BatchJob>& jobs,
                            const std::function<void(const kprof::v1::BatchUpdate&)>& on_update,
                            absl::Duration timeout = {}, size_t jobs_per_message = 64);

  // A MeasureBatch stream without a deadline, to drive by hand (Farm does): one thread may
  // write while another reads.
  struct BatchStream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<kprof::v1::BatchRequest, kprof::v1::BatchUpdate>>
        stream;
  };
  std::unique_ptr<BatchStream> OpenBatch();

  // A Lease stream without a deadline, to drive by hand: write the LeaseRequest, read the
  // updates; a message with `release`, WritesDone or cancelling the context ends the lease.
  struct LeaseStream {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<kprof::v1::LeaseRequest, kprof::v1::LeaseUpdate>>
        stream;
  };
  std::unique_ptr<LeaseStream> OpenLease();

 private:
  Client(std::unique_ptr<kprof::v1::Profiler::Stub> stub, ClientOptions options)
      : stub_(std::move(stub)), options_(options) {}

  void Prepare(grpc::ClientContext* context, absl::Duration timeout) const;
  absl::StatusOr<kprof::v1::ModuleInfo> Upload(std::string_view bytes, const std::string& id,
                                               const std::string& name, const std::string& format);
  // Runs `call`; when it fails with NOT_FOUND for a module this client uploaded, uploads that
  // module again and retries once.
  template <typename Response, typename Call>
  absl::StatusOr<Response> WithReupload(Call call);
  // Uploads again a module this client uploaded (NOT_FOUND when it never did).
  absl::Status Reupload(const std::string& id);

  std::unique_ptr<kprof::v1::Profiler::Stub> stub_;
  ClientOptions options_;
  // A module's bytes kept for uploading again: a string, or for a large copy pages mapped all at
  // once (MAP_POPULATE) rather than faulted in one by one during the copy, which on a VM is
  // dear: a 64 MiB copy beside its SHA-256 took 1.0-1.1 times the hash alone so, 1.3-1.5
  // times into fresh pages.
  class KeptBytes {
   public:
    static std::shared_ptr<const KeptBytes> Copy(std::string_view bytes);
    static std::shared_ptr<const KeptBytes> Own(std::string bytes);
    ~KeptBytes();
    KeptBytes(const KeptBytes&) = delete;
    KeptBytes& operator=(const KeptBytes&) = delete;
    std::string_view view() const {
      return map_ != nullptr ? std::string_view(map_, size_) : text_;
    }

   private:
    KeptBytes() = default;
    std::string text_;
    char* map_ = nullptr;
    size_t size_ = 0;
  };
  struct Uploaded {
    std::shared_ptr<const KeptBytes> bytes;
    std::string name, format;
    uint64_t order = 0;
  };
  // Remembers `bytes` under `id` for re-upload, forgetting the oldest beyond
  // ClientOptions::max_remembered_bytes.
  // `owned`: the bytes' own string, which the remembering may take instead of a copy.
  absl::StatusOr<kprof::v1::ModuleInfo> LoadModule(std::string_view bytes, const std::string& name,
                                                   const std::string& format, std::string* owned);
  // `kept`: a copy made already (else one is made here, or `owned` taken).
  void Remember(const std::string& id, std::string_view bytes, const std::string& name,
                const std::string& format, std::string* owned = nullptr,
                std::shared_ptr<const KeptBytes> kept = nullptr);

  absl::Mutex mutex_;
  std::map<std::string, Uploaded> uploaded_ ABSL_GUARDED_BY(mutex_);
  uint64_t remembered_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t next_order_ ABSL_GUARDED_BY(mutex_) = 0;
};

// The daemon's status as an absl::Status: same code, same message, and its details as payloads
// (wire::MissingModule reads the module a NOT_FOUND says the daemon does not hold: what a client
// answers by uploading it again).
absl::Status FromGrpcStatus(const grpc::Status& status);

// A FAILED update's status, in the same way.
absl::Status StatusOf(const kprof::v1::BatchUpdate& update);

// How often one batch job is sent again after its daemon evicted its module.
inline constexpr int kMaxResends = 3;

// Updates one MeasureBatch message carries when a client asks for several
// (BatchRequest.updates_per_message), and the updates of `message` one by one, in order: the
// message itself (its `more` moved out), then those in its `more`.
inline constexpr uint32_t kUpdatesPerMessage = 1024;
std::vector<kprof::v1::BatchUpdate> Unpack(kprof::v1::BatchUpdate message);

// Lowercase hex SHA-256 of `bytes`: a module's id.
std::string ModuleId(std::string_view bytes);

}  // namespace kprof::client

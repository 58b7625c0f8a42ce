#include "core/cuda/cuda_backend.h"

#include "kprof/config.h"

#if KPROF_HAS_CUDA
#include "base/status_macros.h"
#include "core/cuda/cuda_context.h"
#include "core/cuda/cuda_driver.h"
#include "core/cuda/cuda_module.h"
#include "core/device/timer.h"
#endif

namespace kprof::core {

#if KPROF_HAS_CUDA

absl::StatusOr<DeviceApi*> CudaBackendDeviceApi() { return CudaDeviceApi(); }

void RegisterCudaTimer(TimerRegistry& registry) {
  registry.Register(base::DeviceType::kCuda, CreateCudaEventTimer);
}

report::MetricMap CudaBackendManifest(int ordinal) { return CudaManifest(ordinal); }

absl::StatusOr<int64_t> CudaL2Bytes(int ordinal) {
  KPROF_ASSIGN_OR_RETURN(CudaContext * context, CudaContext::For(ordinal));
  return static_cast<int64_t>(context->l2_bytes());
}

absl::StatusOr<std::unique_ptr<Module>> LoadCudaModule(std::string bytes, const std::string& format,
                                                       int ordinal) {
  return CudaModule::Load(std::move(bytes), format, ordinal);
}

absl::StatusOr<std::function<absl::Status()>> CaptureCudaGraph(
    int ordinal, const std::function<absl::Status()>& launch, int64_t count) {
  KPROF_ASSIGN_OR_RETURN(CudaContext * context, CudaContext::For(ordinal));
  CudaDriver* cu = context->driver();
  if (cu->StreamBeginCapture == nullptr) {
    return absl::FailedPreconditionError(
        "this CUDA driver has no graphs (cuStreamBeginCapture, cuGraphLaunch): cuda_graph needs "
        "a driver for CUDA 12.0 or later");
  }
  KPROF_RETURN_IF_ERROR(context->MakeCurrent());
  const CUstream stream = context->stream();
  // One launch outside the graph first, waited for: a kernel loaded lazily loads now, and a
  // launch the kernel refuses says so as itself, not as a failed capture.
  KPROF_RETURN_IF_ERROR(launch());
  KPROF_CU(cu, StreamSynchronize(stream));
  KPROF_CU(cu, StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  absl::Status captured = absl::OkStatus();
  for (int64_t i = 0; i < count && captured.ok(); ++i) captured = launch();
  CUgraph graph = nullptr;
  // Capture ends whatever happened, so that the stream takes work again.
  const absl::Status ended = cu->Check(cu->StreamEndCapture(stream, &graph), "cuStreamEndCapture");
  if (!captured.ok() || !ended.ok()) {
    if (graph != nullptr) cu->GraphDestroy(graph);
    return !captured.ok() ? captured : ended;
  }
  CUgraphExec exec = nullptr;
  const absl::Status instantiated =
      cu->Check(cu->GraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiateWithFlags");
  cu->GraphDestroy(graph);  // the executable graph keeps what it needs
  KPROF_RETURN_IF_ERROR(instantiated);
  auto owned =
      std::shared_ptr<CUgraphExec_st>(exec, [cu](CUgraphExec e) { cu->GraphExecDestroy(e); });
  return [cu, owned, stream]() -> absl::Status {
    return cu->Check(cu->GraphLaunch(owned.get(), stream), "cuGraphLaunch");
  };
}

absl::StatusOr<std::unique_ptr<Module>> LoadCudaModuleFile(const std::string& path,
                                                           const std::string& format, int ordinal) {
  return CudaModule::LoadFile(path, format, ordinal);
}

bool StartCudaWorker(int ordinal) {
  if (!CudaContext::For(ordinal).ok()) return false;
  (void)CudaManifest(ordinal);
  return true;
}

std::string CudaContextLost(int ordinal) {
  absl::StatusOr<CudaContext*> context = CudaContext::For(ordinal);
  if (!context.ok()) return "";
  // A fault surfaces at the next synchronisation; make sure there has been one. Any failure of
  // it means the context cannot be trusted with the next job.
  const absl::Status synced = (*context)->Synchronize();
  std::string lost = (*context)->driver()->ContextLost();
  if (lost.empty() && !synced.ok()) lost = std::string(synced.message());
  return lost;
}

void PreloadCudaDriver() { CudaDriver::Preload(); }

#else  // a build without CUDA

namespace {
absl::Status NotBuilt() { return absl::FailedPreconditionError("this build has no CUDA"); }
}  // namespace

absl::StatusOr<DeviceApi*> CudaBackendDeviceApi() { return NotBuilt(); }
void RegisterCudaTimer(TimerRegistry&) {}
report::MetricMap CudaBackendManifest(int) { return {}; }
absl::StatusOr<int64_t> CudaL2Bytes(int) { return NotBuilt(); }
absl::StatusOr<std::function<absl::Status()>> CaptureCudaGraph(int,
                                                               const std::function<absl::Status()>&,
                                                               int64_t) {
  return NotBuilt();
}
absl::StatusOr<std::unique_ptr<Module>> LoadCudaModule(std::string, const std::string&, int) {
  return NotBuilt();
}
absl::StatusOr<std::unique_ptr<Module>> LoadCudaModuleFile(const std::string&, const std::string&,
                                                           int) {
  return NotBuilt();
}
bool StartCudaWorker(int) { return false; }
std::string CudaContextLost(int) { return ""; }
void PreloadCudaDriver() {}

#endif

}  // namespace kprof::core

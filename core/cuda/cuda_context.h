// CudaContext: one CUDA device as a worker uses it — the device's primary context (the one the
// CUDA runtime and libraries share, so a shared-library module's own launches see the same
// memory), made current on the calling thread, and one stream that kernels, event timers and
// cache flushes are queued on. The device's limits are read once, for checking launches.
//
// Also here: the CUDA DeviceApi (device memory, copies, memset, the L2 flush) and the CUDA
// event timer, which GetDeviceApi and TimerRegistry::Global hand out for kCuda. Built with
// KPROF_WITH_CUDA.
//
//   KPROF_ASSIGN_OR_RETURN(CudaContext * context, CudaContext::For(0));
//   KPROF_RETURN_IF_ERROR(context->MakeCurrent());
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "core/cuda/cuda_driver.h"
#include "core/cuda/launch_config.h"
#include "core/device/device_api.h"
#include "core/device/timer.h"
#include "report/metric.h"

namespace kprof::core {

class CudaContext {
 public:
  // The context of device `ordinal`, retained on first use for the life of the process (a
  // worker serves one device), and made current on the calling thread.
  static absl::StatusOr<CudaContext*> For(int ordinal);

  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  // Binds the context to the calling thread (cheap when it already is).
  absl::Status MakeCurrent();

  // Waits for everything queued in the context, on every stream.
  absl::Status Synchronize();

  CudaDriver* driver() const { return cu_; }
  CUstream stream() const { return stream_; }
  int ordinal() const { return ordinal_; }
  const LaunchLimits& limits() const { return limits_; }
  int64_t l2_bytes() const { return l2_bytes_; }

 private:
  CudaContext(CudaDriver* cu, int ordinal) : cu_(cu), ordinal_(ordinal) {}
  absl::Status Open();
  void Release();  // after a failed Open

  CudaDriver* cu_;
  int ordinal_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  LaunchLimits limits_;
  int64_t l2_bytes_ = 0;
};

// The DeviceApi of CUDA devices; the process's one.
DeviceApi* CudaDeviceApi();

// A timer of CUDA events recorded on the context's stream around the region: the GPU's time
// from the start event to the stop event, for the work queued there. The start event passes on
// an idle GPU at once, so the first launch's latency (a few microseconds) is inside the region:
// time kernels shorter than that with number > 1 or min_repeat_ms. cuda's registered timer.
absl::StatusOr<std::unique_ptr<Timer>> CreateCudaEventTimer(base::Device device);

// Environment facts of a CUDA device for the manifest: "GPU", "GPU Driver", "CUDA Toolkit",
// "GPU Clocks"..., from the driver and, where present, NVML.
report::MetricMap CudaManifest(int ordinal);

}  // namespace kprof::core

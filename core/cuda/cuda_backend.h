// CUDA as the rest of kprofd sees it, in every build. With the toolkit's headers (KPROF_HAS_CUDA)
// these reach the driver, which is loaded at run time; in a build without CUDA each says so
// (FAILED_PRECONDITION "this build has no CUDA") or does nothing. Generic code — the device
// table, the timers, the runner, the worker — calls these and never tests KPROF_HAS_CUDA; only
// core/cuda/ knows whether CUDA was built.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/device.h"
#include "core/modules/module.h"
#include "report/metric.h"

namespace kprof::core {

class DeviceApi;
class TimerRegistry;

// CUDA's DeviceApi (alloc, copy, sync, cache flush on cuda:N).
absl::StatusOr<DeviceApi*> CudaBackendDeviceApi();

// Registers CUDA's event timer for cuda:N with `registry`; nothing without CUDA.
void RegisterCudaTimer(TimerRegistry& registry);

// The GPU's part of the environment manifest of a run on cuda:`ordinal` (empty without CUDA).
report::MetricMap CudaBackendManifest(int ordinal);

// The L2 cache of cuda:`ordinal`, in bytes (what flush_l2 writes over).
absl::StatusOr<int64_t> CudaL2Bytes(int ordinal);

// Captures `count` calls of `launch` (kernel launches queued on device `ordinal`'s stream) in a
// CUDA graph and returns a call that replays it on that stream: Triton's do_bench_cudagraph,
// which takes the launch overhead out of a kernel's time. FAILED_PRECONDITION when the driver
// has no graphs; the launch's own error when capturing fails.
absl::StatusOr<std::function<absl::Status()>> CaptureCudaGraph(
    int ordinal, const std::function<absl::Status()>& launch, int64_t count);

// A cubin, fatbin or PTX module loaded on cuda:`ordinal`, from its bytes or its file.
absl::StatusOr<std::unique_ptr<Module>> LoadCudaModule(std::string bytes, const std::string& format,
                                                       int ordinal);
absl::StatusOr<std::unique_ptr<Module>> LoadCudaModuleFile(const std::string& path,
                                                           const std::string& format, int ordinal);

// A worker's start on cuda:`ordinal`: the context made and the manifest read once, so that the
// threads the driver starts belong to the worker's baseline. False when the device failed (each
// job then fails with the reason) or there is no CUDA.
bool StartCudaWorker(int ordinal);

// Why the context of cuda:`ordinal` is lost (a kernel faulted), after synchronising with it; ""
// when it is not, or there is no CUDA.
std::string CudaContextLost(int ordinal);

// Loads the driver library before the worker's sandbox closes the paths it lives under.
void PreloadCudaDriver();

}  // namespace kprof::core

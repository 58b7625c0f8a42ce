// CudaDriver: the CUDA driver API, loaded at run time. One kprofd binary runs on hosts with
// and without a GPU: libcuda.so.1 is dlopen'ed (never linked), and every entry point is
// resolved through cuGetProcAddress at the API version this code was written against, 12.0 —
// the lowest that also serves Jetson boards (JetPack 6 ships CUDA 12.2). A plain dlsym could
// bind an older ABI of a versioned function (cuMemAlloc, not cuMemAlloc_v2).
//
// cuda.h is used for its types only. Built with KPROF_WITH_CUDA.
//
//   KPROF_ASSIGN_OR_RETURN(CudaDriver * cu, CudaDriver::Get());
//   KPROF_CU(cu, cuDeviceGetCount(&count));
#pragma once

#include <cuda.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace kprof::core {

// The API version entry points are requested at.
inline constexpr int kCudaApiVersion = 12000;

class CudaDriver {
 public:
  // The process's driver, loaded and initialised (cuInit) once; FAILED_PRECONDITION saying
  // why when there is none: "libcuda.so.1 not found (no NVIDIA driver on this host): ...",
  // "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
  static absl::StatusOr<CudaDriver*> Get();

  // Loads the driver library (libcuda.so.1 from the loader's path) without initialising it,
  // so that a later Get() finds it loaded: for a process about to become a user who may not
  // reach where the library lies. Nothing when it is not there.
  static void Preload();

  // Loads `library` and resolves the entry points, without cuInit: for tests of the failure
  // paths (a missing library, one without cuGetProcAddress).
  static absl::StatusOr<std::unique_ptr<CudaDriver>> Open(const std::string& library);

  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  // "cuDeviceGet: CUDA_ERROR_INVALID_DEVICE (invalid device ordinal)" as FAILED_PRECONDITION
  // for errors of the environment, RESOURCE_EXHAUSTED for memory, ABORTED for the errors that
  // poison the context (recorded for ContextLost), INTERNAL for the rest; OK for CUDA_SUCCESS.
  absl::Status Check(CUresult result, const char* call) const;

  // The entry points kprofd uses, at kCudaApiVersion.
  decltype(&::cuInit) Init = nullptr;
  decltype(&::cuDriverGetVersion) DriverGetVersion = nullptr;
  decltype(&::cuDeviceGetCount) DeviceGetCount = nullptr;
  decltype(&::cuDeviceGet) DeviceGet = nullptr;
  decltype(&::cuDeviceGetName) DeviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute = nullptr;
  decltype(&::cuDeviceTotalMem) DeviceTotalMem = nullptr;
  decltype(&::cuGetErrorName) GetErrorName = nullptr;
  decltype(&::cuGetErrorString) GetErrorString = nullptr;
  decltype(&::cuDeviceGetPCIBusId) DeviceGetPCIBusId = nullptr;
  // Contexts and streams.
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) CtxSynchronize = nullptr;
  decltype(&::cuStreamCreate) StreamCreate = nullptr;
  decltype(&::cuStreamSynchronize) StreamSynchronize = nullptr;
  // Memory.
  decltype(&::cuMemAlloc) MemAlloc = nullptr;
  decltype(&::cuMemFree) MemFree = nullptr;
  decltype(&::cuMemGetInfo) MemGetInfo = nullptr;
  decltype(&::cuMemcpyHtoD) MemcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) MemcpyDtoH = nullptr;
  decltype(&::cuMemcpyDtoD) MemcpyDtoD = nullptr;
  decltype(&::cuMemsetD8) MemsetD8 = nullptr;
  // Events.
  decltype(&::cuEventCreate) EventCreate = nullptr;
  decltype(&::cuEventDestroy) EventDestroy = nullptr;
  decltype(&::cuEventRecord) EventRecord = nullptr;
  decltype(&::cuEventSynchronize) EventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) EventElapsedTime = nullptr;
  // Modules and kernels.
  decltype(&::cuModuleLoadDataEx) ModuleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) ModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) ModuleGetFunction = nullptr;
  decltype(&::cuFuncGetAttribute) FuncGetAttribute = nullptr;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute = nullptr;
  decltype(&::cuLaunchKernel) LaunchKernel = nullptr;
  // Drivers for CUDA 12.4 and later; nullptr before.
  decltype(&::cuFuncGetParamInfo) FuncGetParamInfo = nullptr;
  // Graphs (stream capture and replay), for --cuda-graph; nullptr when the driver lacks one.
  decltype(&::cuStreamBeginCapture) StreamBeginCapture = nullptr;
  decltype(&::cuStreamEndCapture) StreamEndCapture = nullptr;
  decltype(&::cuGraphInstantiateWithFlags) GraphInstantiateWithFlags = nullptr;
  decltype(&::cuGraphLaunch) GraphLaunch = nullptr;
  decltype(&::cuGraphExecDestroy) GraphExecDestroy = nullptr;
  decltype(&::cuGraphDestroy) GraphDestroy = nullptr;

  // The first error that left the process's contexts unusable (an illegal address, a kernel
  // that trapped: CUDA's "sticky" errors), as Check reported it; empty while there is none.
  // Every later call fails the same way, so the process must be replaced.
  std::string ContextLost() const;

 private:
  explicit CudaDriver(void* handle) : handle_(handle) {}
  void* handle_;
  mutable absl::Mutex mutex_;
  mutable std::string context_lost_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace kprof::core

// Calls driver->FN(ARGS...) and returns its error as a Status from the enclosing function.
#define KPROF_CU(driver, call)                                                        \
  do {                                                                                \
    if (::absl::Status kprof_cu_status = (driver)->Check((driver)->call, "cu" #call); \
        !kprof_cu_status.ok()) {                                                      \
      return kprof_cu_status;                                                         \
    }                                                                                 \
  } while (false)

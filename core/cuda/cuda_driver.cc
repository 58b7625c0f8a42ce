#include "core/cuda/cuda_driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <mutex>
#include <type_traits>

#include "absl/strings/str_cat.h"

namespace kprof::core {
namespace {

// cuGetProcAddress as drivers since 12.0 export it, and the 11.3 form before it.
using GetProcAddressV2 = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, cuuint64_t);

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown error";
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaDriver>> CudaDriver::Open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(library, " not found (no NVIDIA driver on this host): ", DlError()));
  }
  std::unique_ptr<CudaDriver> driver(new CudaDriver(handle));
  auto v2 = reinterpret_cast<GetProcAddressV2>(dlsym(handle, "cuGetProcAddress_v2"));
  auto v1 = reinterpret_cast<GetProcAddressV1>(dlsym(handle, "cuGetProcAddress"));
  if (v2 == nullptr && v1 == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        library, " has no cuGetProcAddress: a CUDA driver older than 11.3, or not a driver"));
  }
  const auto resolve = [&](const char* name, auto& entry,
                           int version = kCudaApiVersion) -> absl::Status {
    void* pointer = nullptr;
    CUresult result = CUDA_ERROR_NOT_FOUND;
    if (v2 != nullptr) {
      CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SUCCESS;
      result = v2(name, &pointer, version, CU_GET_PROC_ADDRESS_DEFAULT, &found);
      if (found != CU_GET_PROC_ADDRESS_SUCCESS) result = CUDA_ERROR_NOT_FOUND;
    } else {
      result = v1(name, &pointer, version, CU_GET_PROC_ADDRESS_DEFAULT);
    }
    if (result != CUDA_SUCCESS || pointer == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("the CUDA driver in ", library, " lacks ", name, " at API version ", version,
                       " (a driver for CUDA 12.0 or later is needed)"));
    }
    entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(pointer);
    return absl::OkStatus();
  };
  for (const absl::Status& s : {
           resolve("cuInit", driver->Init),
           resolve("cuDriverGetVersion", driver->DriverGetVersion),
           resolve("cuDeviceGetCount", driver->DeviceGetCount),
           resolve("cuDeviceGet", driver->DeviceGet),
           resolve("cuDeviceGetName", driver->DeviceGetName),
           resolve("cuDeviceGetAttribute", driver->DeviceGetAttribute),
           resolve("cuDeviceTotalMem", driver->DeviceTotalMem),
           resolve("cuGetErrorName", driver->GetErrorName),
           resolve("cuGetErrorString", driver->GetErrorString),
           resolve("cuDeviceGetPCIBusId", driver->DeviceGetPCIBusId),
           resolve("cuDevicePrimaryCtxRetain", driver->DevicePrimaryCtxRetain),
           resolve("cuDevicePrimaryCtxRelease", driver->DevicePrimaryCtxRelease),
           resolve("cuCtxSetCurrent", driver->CtxSetCurrent),
           resolve("cuCtxSynchronize", driver->CtxSynchronize),
           resolve("cuStreamCreate", driver->StreamCreate),
           resolve("cuStreamSynchronize", driver->StreamSynchronize),
           resolve("cuMemAlloc", driver->MemAlloc),
           resolve("cuMemFree", driver->MemFree),
           resolve("cuMemGetInfo", driver->MemGetInfo),
           resolve("cuMemcpyHtoD", driver->MemcpyHtoD),
           resolve("cuMemcpyDtoH", driver->MemcpyDtoH),
           resolve("cuMemcpyDtoD", driver->MemcpyDtoD),
           resolve("cuMemsetD8", driver->MemsetD8),
           resolve("cuEventCreate", driver->EventCreate),
           resolve("cuEventDestroy", driver->EventDestroy),
           resolve("cuEventRecord", driver->EventRecord),
           resolve("cuEventSynchronize", driver->EventSynchronize),
           resolve("cuEventElapsedTime", driver->EventElapsedTime),
           resolve("cuModuleLoadDataEx", driver->ModuleLoadDataEx),
           resolve("cuModuleUnload", driver->ModuleUnload),
           resolve("cuModuleGetFunction", driver->ModuleGetFunction),
           resolve("cuFuncGetAttribute", driver->FuncGetAttribute),
           resolve("cuFuncSetAttribute", driver->FuncSetAttribute),
           resolve("cuLaunchKernel", driver->LaunchKernel),
       }) {
    if (!s.ok()) return s;
  }
  // Optional: a kernel's parameter list, to check a launch's arguments against it.
  if (!resolve("cuFuncGetParamInfo", driver->FuncGetParamInfo, 12040).ok()) {
    driver->FuncGetParamInfo = nullptr;
  }
  // Optional: graphs, for timing a graph of launches; all or none.
  const bool graphs =
      resolve("cuStreamBeginCapture", driver->StreamBeginCapture).ok() &&
      resolve("cuStreamEndCapture", driver->StreamEndCapture).ok() &&
      resolve("cuGraphInstantiateWithFlags", driver->GraphInstantiateWithFlags).ok() &&
      resolve("cuGraphLaunch", driver->GraphLaunch).ok() &&
      resolve("cuGraphExecDestroy", driver->GraphExecDestroy).ok() &&
      resolve("cuGraphDestroy", driver->GraphDestroy).ok();
  if (!graphs) driver->StreamBeginCapture = nullptr;
  return driver;
}

CudaDriver::~CudaDriver() {
  if (handle_ != nullptr) dlclose(handle_);
}

void CudaDriver::Preload() {
  (void)dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // kept for the life of the process
}

absl::StatusOr<CudaDriver*> CudaDriver::Get() {
  static std::once_flag once;
  static absl::StatusOr<CudaDriver*>* loaded = nullptr;
  std::call_once(once, [] {
    absl::StatusOr<std::unique_ptr<CudaDriver>> opened = Open("libcuda.so.1");
    // Jetson boards keep the driver under tegra/, which JetPack puts on the loader's path;
    // try it by path too, should that configuration be missing (a container, say).
    for (const char* tegra : {"/usr/lib/aarch64-linux-gnu/tegra/libcuda.so.1",
                              "/usr/lib/aarch64-linux-gnu/nvidia/libcuda.so.1"}) {
      if (opened.ok()) break;
      if (access(tegra, R_OK) != 0) continue;
      absl::StatusOr<std::unique_ptr<CudaDriver>> found = Open(tegra);
      if (found.ok()) opened = std::move(found);
    }
    if (!opened.ok()) {
      loaded = new absl::StatusOr<CudaDriver*>(opened.status());
      return;
    }
    CudaDriver* driver = opened->release();  // for the life of the process
    if (absl::Status s = driver->Check(driver->Init(0), "cuInit(0)"); !s.ok()) {
      loaded = new absl::StatusOr<CudaDriver*>(s);
      return;
    }
    loaded = new absl::StatusOr<CudaDriver*>(driver);
  });
  return *loaded;
}

std::string CudaDriver::ContextLost() const {
  absl::MutexLock lock(&mutex_);
  return context_lost_;
}

absl::Status CudaDriver::Check(CUresult result, const char* call) const {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (GetErrorName == nullptr || GetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (GetErrorString == nullptr || GetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  const std::string message =
      absl::StrCat(call, ": ", name != nullptr ? name : absl::StrCat("CUresult ", result),
                   text != nullptr ? absl::StrCat(" (", text, ")") : "");
  switch (result) {
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NOT_INITIALIZED:
      return absl::FailedPreconditionError(message);
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(message);
    // A fault in a kernel: the context is unusable from here on.
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:
    case CUDA_ERROR_EXTERNAL_DEVICE:
    case CUDA_ERROR_UNKNOWN:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: {
      absl::MutexLock lock(&mutex_);
      if (context_lost_.empty()) context_lost_ = message;
      return absl::AbortedError(message);
    }
    default:
      return absl::InternalError(message);
  }
}

}  // namespace kprof::core

#include "core/cuda/cuda_context.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "core/collectors/nvml_collector.h"
#include "core/cuda/cuda_devices.h"

namespace kprof::core {
namespace {

absl::Status NotCuda(base::Device device) {
  return absl::InvalidArgumentError(
      absl::StrCat("the CUDA device API was asked about ", base::DeviceSpec(device)));
}

}  // namespace

absl::StatusOr<CudaContext*> CudaContext::For(int ordinal) {
  static absl::Mutex mutex;
  static auto* const contexts = new std::map<int, CudaContext*>();
  CudaContext* context = nullptr;
  {
    absl::MutexLock lock(&mutex);
    if (const auto it = contexts->find(ordinal); it != contexts->end()) {
      context = it->second;
    } else {
      KPROF_ASSIGN_OR_RETURN(CudaDriver * cu, CudaDriver::Get());
      auto opened = std::unique_ptr<CudaContext>(new CudaContext(cu, ordinal));
      if (absl::Status s = opened->Open(); !s.ok()) {
        opened->Release();
        return s;
      }
      context = opened.release();  // for the life of the process
      (*contexts)[ordinal] = context;
    }
  }
  KPROF_RETURN_IF_ERROR(context->MakeCurrent());
  return context;
}

absl::Status CudaContext::Open() {
  KPROF_CU(cu_, DeviceGet(&device_, ordinal_));
  KPROF_CU(cu_, DevicePrimaryCtxRetain(&context_, device_));
  KPROF_CU(cu_, CtxSetCurrent(context_));
  // A blocking stream: copies and memsets on the legacy stream stay ordered with its kernels.
  KPROF_CU(cu_, StreamCreate(&stream_, CU_STREAM_DEFAULT));
  const auto attribute = [this](CUdevice_attribute which, int64_t* out) -> absl::Status {
    int value = 0;
    KPROF_CU(cu_, DeviceGetAttribute(&value, which, device_));
    *out = value;
    return absl::OkStatus();
  };
  KPROF_RETURN_IF_ERROR(
      attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &limits_.max_threads_per_block));
  KPROF_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &limits_.max_block[0]));
  KPROF_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &limits_.max_block[1]));
  KPROF_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &limits_.max_block[2]));
  KPROF_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &limits_.max_grid[0]));
  KPROF_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &limits_.max_grid[1]));
  KPROF_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &limits_.max_grid[2]));
  KPROF_RETURN_IF_ERROR(
      attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &limits_.max_shared_bytes));
  KPROF_RETURN_IF_ERROR(attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &l2_bytes_));
  return absl::OkStatus();
}

void CudaContext::Release() {
  if (context_ == nullptr) return;
  (void)cu_->CtxSetCurrent(nullptr);
  (void)cu_->DevicePrimaryCtxRelease(device_);  // its streams go with it
  context_ = nullptr;
  stream_ = nullptr;
}

absl::Status CudaContext::MakeCurrent() {
  KPROF_CU(cu_, CtxSetCurrent(context_));
  return absl::OkStatus();
}

absl::Status CudaContext::Synchronize() {
  KPROF_CU(cu_, CtxSynchronize());
  return absl::OkStatus();
}

namespace {

// Device memory through the driver. Every call makes the device's context current first: the
// API may be used from any thread.
class CudaDeviceApiImpl final : public DeviceApi {
 public:
  absl::Status Sync(base::Device device) override {
    KPROF_ASSIGN_OR_RETURN(CudaContext * c, Context(device));
    return c->Synchronize();
  }

  absl::StatusOr<void*> Alloc(base::Device device, size_t bytes) override {
    KPROF_ASSIGN_OR_RETURN(CudaContext * c, Context(device));
    CUdeviceptr ptr = 0;
    // cuMemAlloc refuses zero bytes; allocations are 256-byte aligned (and more).
    const size_t size = bytes == 0 ? kAllocAlignment : bytes;
    if (absl::Status s = c->driver()->Check(c->driver()->MemAlloc(&ptr, size), "cuMemAlloc");
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("allocating ", bytes, " bytes on ",
                                                 base::DeviceString(device), ": ", s.message()));
    }
    return reinterpret_cast<void*>(ptr);
  }

  void Free(base::Device device, void* ptr) override {
    if (ptr == nullptr) return;
    absl::StatusOr<CudaContext*> c = Context(device);
    if (c.ok()) (void)(*c)->driver()->MemFree(reinterpret_cast<CUdeviceptr>(ptr));
  }

  absl::Status Copy(base::Device device, void* dst, const void* src, size_t bytes,
                    CopyKind kind) override {
    KPROF_ASSIGN_OR_RETURN(CudaContext * c, Context(device));
    CudaDriver* cu = c->driver();
    const auto d = reinterpret_cast<CUdeviceptr>(dst);
    const auto s = reinterpret_cast<CUdeviceptr>(src);
    switch (kind) {
      case CopyKind::kHostToDevice:
        KPROF_CU(cu, MemcpyHtoD(d, src, bytes));
        break;
      case CopyKind::kDeviceToHost:
        KPROF_CU(cu, MemcpyDtoH(dst, s, bytes));
        break;
      case CopyKind::kDeviceToDevice:
        KPROF_CU(cu, MemcpyDtoD(d, s, bytes));
        break;
    }
    return absl::OkStatus();
  }

  absl::Status Memset(base::Device device, void* dst, uint8_t value, size_t bytes) override {
    KPROF_ASSIGN_OR_RETURN(CudaContext * c, Context(device));
    KPROF_CU(c->driver(), MemsetD8(reinterpret_cast<CUdeviceptr>(dst), value, bytes));
    return absl::OkStatus();
  }

  // A GPU has no instruction that evicts one range; writing a buffer the size of its L2 does.
  absl::Status FlushCache(base::Device device, const void*, size_t) override {
    KPROF_ASSIGN_OR_RETURN(CudaContext * c, Context(device));
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(c->l2_bytes(), 1));
    void*& scratch = scratch_[device.id];
    if (scratch == nullptr) {
      KPROF_ASSIGN_OR_RETURN(scratch, Alloc(device, bytes));
    }
    return Memset(device, scratch, 0x5a, bytes);
  }

 private:
  static absl::StatusOr<CudaContext*> Context(base::Device device) {
    if (device.type != base::DeviceType::kCuda) return NotCuda(device);
    return CudaContext::For(device.id);
  }

  std::map<int, void*> scratch_;  // one L2-sized buffer per device, kept for the process
};

class CudaEventTimer final : public Timer {
 public:
  explicit CudaEventTimer(CudaContext* context) : context_(context), cu_(context->driver()) {}
  ~CudaEventTimer() override {
    if (start_ != nullptr) (void)cu_->EventDestroy(start_);
    if (stop_ != nullptr) (void)cu_->EventDestroy(stop_);
  }

  absl::Status Create() {
    KPROF_CU(cu_, EventCreate(&start_, CU_EVENT_DEFAULT));
    KPROF_CU(cu_, EventCreate(&stop_, CU_EVENT_DEFAULT));
    return absl::OkStatus();
  }

  void Start() override {
    Keep(cu_->Check(cu_->EventRecord(start_, context_->stream()), "cuEventRecord"));
  }
  void Stop() override {
    Keep(cu_->Check(cu_->EventRecord(stop_, context_->stream()), "cuEventRecord"));
  }

  int64_t ElapsedNanos() override {
    if (!status_.ok()) return 0;
    Keep(cu_->Check(cu_->EventSynchronize(stop_), "cuEventSynchronize"));
    float ms = 0;
    if (status_.ok()) {
      Keep(cu_->Check(cu_->EventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime"));
    }
    return status_.ok() ? std::llround(static_cast<double>(ms) * 1e6) : 0;
  }

  absl::Status status() const override { return status_; }

 private:
  void Keep(absl::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }

  CudaContext* context_;
  CudaDriver* cu_;
  CUevent start_ = nullptr;
  CUevent stop_ = nullptr;
  absl::Status status_;
};

}  // namespace

DeviceApi* CudaDeviceApi() {
  static auto* const api = new CudaDeviceApiImpl();
  return api;
}

absl::StatusOr<std::unique_ptr<Timer>> CreateCudaEventTimer(base::Device device) {
  if (device.type != base::DeviceType::kCuda) return NotCuda(device);
  KPROF_ASSIGN_OR_RETURN(CudaContext * context, CudaContext::For(device.id));
  auto timer = std::make_unique<CudaEventTimer>(context);
  KPROF_RETURN_IF_ERROR(timer->Create());
  return timer;
}

report::MetricMap CudaManifest(int ordinal) {
  report::MetricMap m;
  const absl::StatusOr<CudaInventory> inventory = CudaDevices();
  m["CUDA toolkit (build)"] = CudaVersionText(CUDA_VERSION);
  if (!inventory.ok()) {
    m["GPU"] = absl::StrCat("unavailable: ", inventory.status().message());
    return m;
  }
  m["GPU driver (CUDA)"] = CudaVersionText(inventory->driver_version);
  for (const CudaDeviceInfo& d : inventory->devices) {
    if (d.id != ordinal) continue;
    m["GPU"] = absl::StrCat(d.name, " (sm_", d.compute_major, d.compute_minor, ", ",
                            d.multiprocessors, " SMs)");
    m["GPU PCI bus id"] = d.pci_bus_id;
    for (auto& [name, value] : NvmlManifest(ordinal)) m.emplace(name, std::move(value));
  }
  return m;
}

}  // namespace kprof::core

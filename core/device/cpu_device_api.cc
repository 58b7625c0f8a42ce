// The CPU's DeviceApi: host memory, nothing to synchronise, cache lines flushed by instruction.
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/cuda/cuda_backend.h"
#include "core/device/device_api.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kprof::core {
namespace {

constexpr size_t kCacheLine = 64;

class CpuDeviceApi final : public DeviceApi {
 public:
  absl::Status Sync(base::Device) override { return absl::OkStatus(); }

  absl::StatusOr<void*> Alloc(base::Device device, size_t bytes) override {
    // aligned_alloc wants a multiple of the alignment; round up without overflowing.
    if (bytes > SIZE_MAX - kAllocAlignment) return TooLarge(device, bytes);
    const size_t rounded = (bytes + kAllocAlignment - 1) / kAllocAlignment * kAllocAlignment;
    void* ptr = std::aligned_alloc(kAllocAlignment, rounded == 0 ? kAllocAlignment : rounded);
    if (ptr == nullptr) return TooLarge(device, bytes);
    return ptr;
  }

  void Free(base::Device, void* ptr) override { std::free(ptr); }

  absl::Status Copy(base::Device, void* dst, const void* src, size_t bytes, CopyKind) override {
    std::memmove(dst, src, bytes);
    return absl::OkStatus();
  }

  absl::Status Memset(base::Device, void* dst, uint8_t value, size_t bytes) override {
    std::memset(dst, value, bytes);
    return absl::OkStatus();
  }

  absl::Status FlushCache(base::Device, const void* data, size_t bytes) override {
    const auto begin = reinterpret_cast<uintptr_t>(data) & ~(kCacheLine - 1);
    const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
#if defined(__x86_64__) || defined(__i386__)
    for (uintptr_t line = begin; line < end; line += kCacheLine) {
      _mm_clflush(reinterpret_cast<const void*>(line));
    }
    _mm_mfence();
    return absl::OkStatus();
#elif defined(__aarch64__)
    for (uintptr_t line = begin; line < end; line += kCacheLine) {
      asm volatile("dc civac, %0" : : "r"(line) : "memory");
    }
    asm volatile("dsb ish" : : : "memory");
    return absl::OkStatus();
#else
    (void)begin;
    (void)end;
    return absl::UnimplementedError("flushing CPU caches is not implemented on this architecture");
#endif
  }

 private:
  static absl::Status TooLarge(base::Device device, size_t bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes on ", base::DeviceString(device)));
  }
};

}  // namespace

absl::StatusOr<DeviceApi*> GetDeviceApi(base::DeviceType type) {
  static CpuDeviceApi* const cpu = new CpuDeviceApi();
  switch (type) {
    case base::DeviceType::kCpu:
      return cpu;
    case base::DeviceType::kCuda:
      return CudaBackendDeviceApi();
  }
  return absl::FailedPreconditionError(absl::StrCat("device type '",
                                                    std::string(base::DeviceTypeName(type)),
                                                    "' has no device API in this build"));
}

}  // namespace kprof::core

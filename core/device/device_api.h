// DeviceApi: memory and synchronisation on a device, one implementation per device type.
//
// Everything that touches device memory goes through here, so the time evaluator, the argument
// allocator and the cache flush are written once for every device type. CPU is always present;
// CUDA comes behind the same interface.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/device.h"

namespace kprof::core {

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

class DeviceApi {
 public:
  // Every allocation is aligned to at least this many bytes: what DLPack promises of a
  // DLTensor's data (as CUDA allocations are), and more than any vector load needs.
  static constexpr size_t kAllocAlignment = 256;

  virtual ~DeviceApi() = default;

  // Waits until all work queued on `device` has finished.
  virtual absl::Status Sync(base::Device device) = 0;

  // `bytes` of device memory, aligned to kAllocAlignment; zero bytes gives a valid, distinct
  // pointer. RESOURCE_EXHAUSTED when the device has not that much.
  virtual absl::StatusOr<void*> Alloc(base::Device device, size_t bytes) = 0;

  // Frees what Alloc returned; nullptr is ignored.
  virtual void Free(base::Device device, void* ptr) = 0;

  virtual absl::Status Copy(base::Device device, void* dst, const void* src, size_t bytes,
                            CopyKind kind) = 0;
  virtual absl::Status Memset(base::Device device, void* dst, uint8_t value, size_t bytes) = 0;

  // Evicts [data, data + bytes) from the device's caches, so the next access misses.
  virtual absl::Status FlushCache(base::Device device, const void* data, size_t bytes) = 0;
};

// The DeviceApi for `type`; FAILED_PRECONDITION naming the type when this build or host has
// none. The result lives as long as the process.
absl::StatusOr<DeviceApi*> GetDeviceApi(base::DeviceType type);

}  // namespace kprof::core

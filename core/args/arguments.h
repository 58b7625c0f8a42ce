// Arguments: the tensors of one job, allocated on its device from argument specs, placed as
// asked (tensor_placement.h), initialised — every page touched before anything is timed — and
// freed with the object, on every path, errors included. Scalars (0-d tensors) stay in host
// memory (device kDLCPU) on every device: a kernel takes them by value, and a host function
// reads them without a copy.
//
//   KPROF_ASSIGN_OR_RETURN(auto args, Arguments::Allocate(specs, seed, device, limits));
//   fn(args->tensors(), args->size());
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/device.h"
#include "core/args/arg_spec.h"
#include "core/args/tensor_placement.h"
#include "core/device/device_api.h"
#include "dlpack/dlpack.h"

namespace kprof::core {

// The byte that Arguments::Poison writes over an integer or bool tensor.
inline constexpr uint8_t kPoisonByte = 0xa5;

struct ArgumentLimits {
  // All tensors of one job together; checked before anything is allocated.
  uint64_t max_total_bytes = uint64_t{4} << 30;
};

class Arguments {
 public:
  // Allocates and initialises one tensor per spec on `device`, each where `placement` says.
  // RESOURCE_EXHAUSTED, before any allocation, when the specs ask for more than `limits` allow;
  // INVALID_ARGUMENT for a placement out of range.
  static absl::StatusOr<std::unique_ptr<Arguments>> Allocate(
      const std::vector<ArgSpec>& specs, uint64_t seed, base::Device device,
      const ArgumentLimits& limits = {}, const PlacementOptions& placement = {});

  ~Arguments();
  Arguments(const Arguments&) = delete;
  Arguments& operator=(const Arguments&) = delete;

  DLTensor* tensors() { return tensors_.data(); }
  int32_t size() const { return static_cast<int32_t>(tensors_.size()); }
  const std::vector<ArgSpec>& specs() const { return specs_; }

  // "float32[256, 256], float32[256, 256]": the report's Argument Shapes.
  std::string ShapeString() const;

  // Lowercase hex SHA-256 of each tensor's bytes as they are now (after the run, so that a
  // tuner can compare candidates' outputs).
  absl::StatusOr<std::vector<std::string>> Sha256() const;

  // Copies tensor `index`'s bytes as they are now (spec.num_bytes of them) to host memory `out`.
  absl::Status ReadBack(size_t index, void* out) const;
  // Tensor `index`'s bytes where the host reads them in place (a CPU device's, a scalar's), or
  // null for device memory (ReadBack copies those).
  const void* HostData(size_t index) const {
    return OnHost(tensors_.at(index)) ? tensors_[index].data : nullptr;
  }

  // Writes every tensor afresh, in place, as Allocate would have with `seed`: the same buffers
  // at the same addresses hold another seed's data (a strict check's fresh inputs).
  absl::Status Refill(uint64_t seed);
  // Overwrites tensor `index` with poison: NaN in every element of a floating-point tensor,
  // kPoisonByte in every byte of any other. A function that does not write it leaves it so.
  absl::Status Poison(size_t index);
  // A hash of tensor `index`'s bytes as they are now (within this process: for telling whether
  // they changed).
  absl::StatusOr<uint64_t> Fingerprint(size_t index) const;

  // Evicts the tensors from index `first` on from the device's caches.
  absl::Status FlushFromCaches(size_t first);

  // Where each tensor lies now.
  std::vector<TensorPlace> Placement() const;
  // The bytes allocated for the tensors, their placement room included.
  uint64_t allocated_bytes() const { return allocated_bytes_; }

  // Moves tensor `index`'s contents to lie `offset` bytes past a page boundary (under 4096, a
  // multiple of its alignment), within its allocation; its data pointer changes.
  absl::Status MoveTo(size_t index, uint64_t offset);

  // Whether transparent huge pages were asked for the tensors (madvise on CPU memory).
  bool huge_pages() const { return huge_pages_; }

 private:
  Arguments(std::vector<ArgSpec> specs, base::Device device, DeviceApi* api, DeviceApi* host_api);
  static bool OnHost(const DLTensor& t) { return t.device.device_type == kDLCPU; }
  absl::Status Place(size_t index, const PlacementOptions& placement);
  // Writes tensor `index`'s initial values for `seed` (through `staging` on a device).
  absl::Status Initialize(size_t index, uint64_t seed, std::vector<unsigned char>& staging);
  // The bytes allocated for `spec`'s data so that it can lie at any offset within a page past a
  // `boundary` (huge: in whole 2 MiB pages); 0 when that overflows.
  static uint64_t Span(const ArgSpec& spec, uint64_t boundary, bool huge);

  std::vector<ArgSpec> specs_;
  base::Device device_;
  DeviceApi* api_;
  DeviceApi* host_api_;  // for scalars, which stay in host memory on every device
  std::vector<DLTensor> tensors_;
  std::vector<unsigned char*> allocations_;  // what Alloc returned, one per tensor
  std::vector<unsigned char*> starts_;       // the boundary each tensor's offset counts from
  uint64_t alignment_ = kMinTensorAlignment;
  bool huge_pages_ = false;
  uint64_t allocated_bytes_ = 0;
};

// Writes spec's initial values for argument `index` into the host buffer `out` (spec.num_bytes
// long). Exposed so that tests can check bytes against literal expectations.
void InitializeHostBytes(const ArgSpec& spec, uint64_t seed, uint64_t index, void* out);

}  // namespace kprof::core

// Arguments: the tensors of one job, allocated on its device from argument specs, initialised,
// and freed with the object — on every path, errors included. Scalars (0-d tensors) stay in
// host memory (device kDLCPU) on every device: a kernel takes them by value, and a host
// function reads them without a copy.
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
#include "core/device/device_api.h"
#include "dlpack/dlpack.h"

namespace kprof::core {

struct ArgumentLimits {
  // All tensors of one job together; checked before anything is allocated.
  uint64_t max_total_bytes = uint64_t{4} << 30;
};

class Arguments {
 public:
  // Allocates and initialises one tensor per spec on `device`. RESOURCE_EXHAUSTED, before any
  // allocation, when the specs ask for more than `limits` allow.
  static absl::StatusOr<std::unique_ptr<Arguments>> Allocate(const std::vector<ArgSpec>& specs,
                                                             uint64_t seed, base::Device device,
                                                             const ArgumentLimits& limits = {});

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

  // Evicts the tensors from index `first` on from the device's caches.
  absl::Status FlushFromCaches(size_t first);

 private:
  Arguments(std::vector<ArgSpec> specs, base::Device device, DeviceApi* api, DeviceApi* host_api);
  static bool OnHost(const DLTensor& t) { return t.device.device_type == kDLCPU; }

  std::vector<ArgSpec> specs_;
  base::Device device_;
  DeviceApi* api_;
  DeviceApi* host_api_;  // for scalars, which stay in host memory on every device
  std::vector<DLTensor> tensors_;
};

// Writes spec's initial values for argument `index` into the host buffer `out` (spec.num_bytes
// long). Exposed so that tests can check bytes against literal expectations.
void InitializeHostBytes(const ArgSpec& spec, uint64_t seed, uint64_t index, void* out);

}  // namespace kprof::core

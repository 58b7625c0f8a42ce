// Kernel parameters from a job's arguments, packed the way cuLaunchKernel takes them: one
// pointer per parameter, to its value. A tensor argument is passed as its device pointer (the
// kernel takes `float* x`); a 0-d tensor (a scalar, "float32:2") by value in its dtype (the
// kernel takes `float a`).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dlpack/dlpack.h"

namespace kprof::core {

class KernelParams {
 public:
  // INVALID_ARGUMENT for a scalar of a dtype a kernel parameter cannot take (wider than 8
  // bytes, or with lanes), naming the argument.
  static absl::StatusOr<KernelParams> Pack(const DLTensor* args, int32_t num_args);

  // cuLaunchKernel's kernelParams, pointing into this object (copies and moves point into
  // theirs).
  void** pointers() { return pointers_.data(); }
  size_t size() const { return pointers_.size(); }

  // The bytes of parameter i, for tests: 8 for a pointer, the dtype's size for a scalar.
  const uint8_t* value(size_t i) const { return values_[i].bytes; }
  size_t value_size(size_t i) const { return values_[i].size; }

  KernelParams(const KernelParams& other) : values_(other.values_) { Point(); }
  KernelParams(KernelParams&& other) noexcept : values_(std::move(other.values_)) { Point(); }
  KernelParams& operator=(const KernelParams&) = delete;
  KernelParams& operator=(KernelParams&&) = delete;

 private:
  struct Value {
    alignas(8) uint8_t bytes[8] = {0};
    size_t size = 0;
  };
  KernelParams() = default;
  void Point();

  std::vector<Value> values_;
  std::vector<void*> pointers_;
};

}  // namespace kprof::core

#include "core/cuda/kernel_params.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kprof::core {

absl::StatusOr<KernelParams> KernelParams::Pack(const DLTensor* args, int32_t num_args) {
  KernelParams params;
  params.values_.resize(static_cast<size_t>(num_args < 0 ? 0 : num_args));
  for (int32_t i = 0; i < num_args; ++i) {
    const DLTensor& t = args[i];
    Value& v = params.values_[static_cast<size_t>(i)];
    if (t.ndim == 0) {
      const size_t bytes = (static_cast<size_t>(t.dtype.bits) + 7) / 8;
      if (t.dtype.lanes != 1 || bytes == 0 || bytes > sizeof v.bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("argument ", i, ": a scalar kernel parameter of ", t.dtype.bits,
                         " bits x ", t.dtype.lanes, " lanes (accepted: one lane of 8 to 64 bits)"));
      }
      std::memcpy(v.bytes, static_cast<const uint8_t*>(t.data) + t.byte_offset, bytes);
      v.size = bytes;
    } else {
      // The device address of the tensor's first element, as a 64-bit value.
      const uint64_t address = reinterpret_cast<uintptr_t>(t.data) + t.byte_offset;
      std::memcpy(v.bytes, &address, sizeof address);
      v.size = sizeof address;
    }
  }
  params.Point();
  return params;
}

void KernelParams::Point() {
  pointers_.clear();
  for (Value& v : values_) pointers_.push_back(v.bytes);
}

}  // namespace kprof::core

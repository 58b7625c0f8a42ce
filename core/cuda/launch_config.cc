#include "core/cuda/launch_config.h"

#include "absl/strings/str_cat.h"

namespace kprof::core {

absl::Status ValidateLaunch(const LaunchConfig& config, const LaunchLimits& limits) {
  static constexpr const char* kAxis[] = {"x", "y", "z"};
  for (int i = 0; i < 3; ++i) {
    for (const auto& [what, value, limit] :
         {std::tuple{"grid", config.grid[i], limits.max_grid[i]},
          std::tuple{"block", config.block[i], limits.max_block[i]}}) {
      if (value < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ".", kAxis[i], " = ", value, ": each dimension is at least 1"));
      }
      if (value > limit) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ".", kAxis[i], " = ", value, " exceeds this device's ", limit));
      }
    }
  }
  const int64_t threads = config.block[0] * config.block[1] * config.block[2];
  if (threads > limits.max_threads_per_block) {
    return absl::InvalidArgumentError(absl::StrCat("block has ", threads, " threads; this kernel ",
                                                   "allows ", limits.max_threads_per_block,
                                                   " on this device"));
  }
  if (config.shared_bytes < 0 || config.shared_bytes > limits.max_shared_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dynamic shared memory of ", config.shared_bytes, " bytes is out of range (accepted: 0 to ",
        limits.max_shared_bytes, " on this device for this kernel)"));
  }
  return absl::OkStatus();
}

}  // namespace kprof::core

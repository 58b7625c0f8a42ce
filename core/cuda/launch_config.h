// A kernel's launch configuration and the device limits it is checked against before launch,
// so a bad grid or block is INVALID_ARGUMENT naming the dimension and the limit rather than a
// CUDA_ERROR_INVALID_VALUE from the driver (or, worse, a launch that silently does nothing).
#pragma once

#include <array>
#include <cstdint>

#include "absl/status/status.h"

namespace kprof::core {

struct LaunchConfig {
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t shared_bytes = 0;  // dynamic shared memory per block
};

// What the driver reports for a device (cuDeviceGetAttribute), and a kernel's own limit.
struct LaunchLimits {
  int64_t max_threads_per_block = 1024;
  std::array<int64_t, 3> max_block = {1024, 1024, 64};
  std::array<int64_t, 3> max_grid = {2147483647, 65535, 65535};
  // Dynamic shared memory a block may use: the opt-in maximum less the kernel's static use.
  int64_t max_shared_bytes = 48 << 10;
};

// OK, or INVALID_ARGUMENT naming the first dimension out of range and what is accepted:
// "block.x = 2048 exceeds this device's 1024", "block has 2048 threads; this kernel allows
// 1024", "grid.y = 0: each dimension is at least 1".
absl::Status ValidateLaunch(const LaunchConfig& config, const LaunchLimits& limits);

}  // namespace kprof::core

// GpuSharing: the other processes computing on a CUDA device while a measurement ran, from
// NVML's list of the GPU's compute processes taken before and after it. A kernel timed beside
// another process's kernels shares the SMs and the memory bus with them, and its time says so
// only as noise; the warning names the process instead.
//
// This process is not another, nor are the daemon's other workers (processes of the same
// parent), which hold a context on the device but run nothing while this one measures: the
// daemon runs one job per device at a time.
//
//   GpuSharing sharing(job.device);
//   sharing.Before();
//   Measure();
//   if (std::string warning = sharing.After(); !warning.empty()) warnings.push_back(warning);
#pragma once

#include <set>
#include <string>
#include <utility>

#include "base/device.h"

namespace kprof::core {

class GpuSharing {
 public:
  // Watches nothing but a CUDA device, and nothing where NVML cannot list its processes.
  explicit GpuSharing(base::Device device, std::string library = "libnvidia-ml.so.1")
      : device_(device), library_(std::move(library)) {}

  void Before() { Sample(); }
  // "another process computed on cuda:0 during the measurement: pid 4242 (512 MiB)", naming each
  // one listed before or after; "" when there was none or nothing could be told.
  std::string After();

 private:
  void Sample();

  base::Device device_;
  std::string library_;
  std::set<std::pair<int, int64_t>> others_;  // pid, MiB of GPU memory
};

// Whether `pid` is this process's parent or another child of it; false when its /proc entry
// cannot be read, or this process is a child of init (whose children are not one program's).
bool IsSiblingOrParent(int pid);

}  // namespace kprof::core

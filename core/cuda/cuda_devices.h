// The host's CUDA devices as the driver reports them, or why there are none — for GetInfo and
// for the error a job on cuda:N gets. Compiled in every build: without KPROF_WITH_CUDA the
// answer is that the build has no CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kprof::core {

struct CudaDeviceInfo {
  int id = 0;
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
  uint64_t memory_bytes = 0;
  int max_threads_per_block = 0;
  int l2_bytes = 0;
  int clock_khz = 0;         // the SM clock's rated peak
  int memory_clock_khz = 0;  // the memory clock's peak
  int memory_bus_bits = 0;
  std::string pci_bus_id;  // "0000:41:00.0": how NVML finds the same GPU

  // Peak memory bandwidth from the memory clock and bus width (double data rate), in GB/s;
  // 0 when the driver does not say.
  double PeakBandwidthGBps() const {
    return 2.0 * memory_clock_khz * 1e3 * (memory_bus_bits / 8.0) / 1e9;
  }
};

struct CudaInventory {
  int driver_version = 0;  // 12040 for 12.4
  std::vector<CudaDeviceInfo> devices;
};

// FAILED_PRECONDITION saying why there is no CUDA device: "this kprofd was built without
// CUDA", "libcuda.so.1 not found (no NVIDIA driver on this host): ...", "cuInit(0):
// CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)".
absl::StatusOr<CudaInventory> CudaDevices();

// The PCI bus id of cuda:`ordinal` ("0000:41:00.0"); FAILED_PRECONDITION without CUDA.
absl::StatusOr<std::string> CudaPciBusId(int ordinal);

// "12.4" for 12040.
std::string CudaVersionText(int version);

}  // namespace kprof::core

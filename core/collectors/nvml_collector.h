// NvmlCollector ("nvml"): what a GPU did over a measured region, from NVIDIA's management
// library — energy (the total-energy counter's delta, in mJ) and average power, SM and memory
// clocks before and after, temperature, and the reasons the clocks were held back, by name.
//
// libnvidia-ml.so.1 is dlopen'ed, never linked, and its few entry points are declared here
// (there is no nvml.h to build against). Where it is absent — hosts without an NVIDIA driver,
// Jetson boards, which have no NVML — Init says so and GetInfo does not list the collector.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/collectors/metric_collector.h"
#include "core/host/throttle.h"

namespace kprof::core {

// NVML's clock-event ("throttle") reason bits as names: "GpuIdle", "SwPowerCap",
// "HwSlowdown", ...; unknown bits as "0x...".
std::vector<std::string> ThrottleReasonNames(uint64_t mask);

// The reason bit NVML sets while the GPU has nothing to do, which every repeat's reading after
// its synchronisation may see: not a reason a repeat ran slow.
inline constexpr uint64_t kNvmlGpuIdle = 0x1;

class NvmlLibrary;

// The watch on cuda:`ordinal`'s SM clock for throttling: its nominal is NVML's maximum SM clock,
// and each repeat gets NVML's clock-event reasons. Unavailable, saying why, where NVML is not
// (or cannot tell the clocks). `library` is opened once per process.
ThrottleMonitor GpuThrottleMonitor(double threshold, int ordinal,
                                   const std::string& library = "libnvidia-ml.so.1");

// Facts about cuda:`ordinal` for the environment manifest, from NVML: current and maximum
// clocks, temperature, throttle reasons, persistence mode, and the other processes computing
// on it. One "GPU management (NVML)" field saying why where NVML is absent.
report::MetricMap NvmlManifest(int ordinal, const std::string& library = "libnvidia-ml.so.1");

// cuda:`ordinal`'s clocks as NVML gives them (-1 for what it does not): the SM and memory clocks
// now, the SM clock's maximum and its base (the default application clock), and the GPU's PCI
// bus id (from the CUDA driver; "" without it).
struct GpuClocks {
  int64_t sm_mhz = -1, memory_mhz = -1, max_sm_mhz = -1, base_sm_mhz = -1;
  std::string pci_bus_id;
};
absl::StatusOr<GpuClocks> ReadGpuClocks(int ordinal,
                                        const std::string& library = "libnvidia-ml.so.1");

// Locks cuda:`ordinal`'s SM clock at `mhz` (nvmlDeviceSetGpuLockedClocks), and puts it back
// (nvmlDeviceResetGpuLockedClocks; the GPU found by `pci_bus_id` when given, else by ordinal).
// PERMISSION_DENIED where NVML needs root, UNIMPLEMENTED where the GPU or NVML cannot.
absl::Status LockGpuClocks(int ordinal, int64_t mhz,
                           const std::string& library = "libnvidia-ml.so.1");
absl::Status ResetGpuClocks(int ordinal, const std::string& pci_bus_id,
                            const std::string& library = "libnvidia-ml.so.1");

// A process computing on a GPU, as NVML lists them.
struct GpuProcess {
  int pid = 0;
  int64_t memory_mib = 0;
};

// Every process computing on cuda:`ordinal` now (nvmlDeviceGetComputeRunningProcesses_v3),
// this one included. FAILED_PRECONDITION where NVML is absent, UNIMPLEMENTED where it cannot
// list them.
absl::StatusOr<std::vector<GpuProcess>> GpuComputeProcesses(
    int ordinal, const std::string& library = "libnvidia-ml.so.1");

class NvmlCollector final : public MetricCollector {
 public:
  // `library`: where NVML is (the default: the system's).
  explicit NvmlCollector(std::string library = "libnvidia-ml.so.1");
  ~NvmlCollector() override;

  std::string_view name() const override { return "nvml"; }

  // Loads NVML and initialises it; FAILED_PRECONDITION naming the library and why when it
  // cannot ("libnvidia-ml.so.1 not found", "nvmlInit_v2: ...").
  absl::Status Init(const std::vector<base::Device>& devices) override;

  // Measures cuda:N; nullptr for other devices.
  absl::StatusOr<std::unique_ptr<Measurement>> Start(base::Device device) override;

 private:
  std::string library_path_;
  std::unique_ptr<NvmlLibrary> library_;
};

}  // namespace kprof::core

#include "server/worker/host_description.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/device.h"
#include "core/collectors/nvml_collector.h"
#include "core/collectors/papi_collector.h"
#include "core/collectors/perf_collector.h"
#include "core/collectors/rapl_collector.h"
#include "core/collectors/rusage_collector.h"
#include "core/collectors/tegra_rails.h"
#include "core/cuda/cuda_devices.h"
#include "core/host/cpu_info.h"
#include "core/measure/profiler.h"

namespace kprof::server {
namespace {

using kprof::v1::CollectorInfo;
using kprof::v1::DeviceInfo;
using kprof::worker::v1::HostDescription;

std::string CpuModel() {
  const std::string name = core::CpuModelName(core::HostCpuInfo());
  return name.empty() ? "unknown" : name;
}

void SetDevice(base::Device device, DeviceInfo* info) {
  info->set_device(base::DeviceSpec(device));
  info->set_type(std::string(base::DeviceTypeName(device.type)));
  info->set_id(device.id);
}

// The collectors a job on `device` may ask for, each available or why not.
void AddCollectors(base::Device device, bool nvml, DeviceInfo* info) {
  CollectorInfo* rusage = info->add_collectors();
  rusage->set_name("rusage");
  rusage->set_available(true);
  for (std::string_view m : core::kRusageMetrics) {
    rusage->add_metrics(std::string(m));
  }
  CollectorInfo* perf = info->add_collectors();
  perf->set_name("perf");
  // Whether this host lets perf count at all, probed with the one event every kernel has; then
  // each event, listed as a metric only where it counts here.
  const absl::Status probe = (*core::PerfCollector::Create({"task-clock"}))->Init({device});
  perf->set_available(probe.ok());
  if (!probe.ok()) perf->set_reason(std::string(probe.message()));
  for (const std::string& event : core::PerfCollector::KnownEvents()) {
    const absl::Status counts = (*core::PerfCollector::Create({event}))->Init({device});
    if (counts.ok()) {
      perf->add_metrics(event);
      continue;
    }
    kprof::v1::UncountableMetric* no = perf->add_uncountable();
    no->set_name(event);
    // "perf event 'cycles' cannot be counted here: REASON": the reason alone.
    const std::string message(counts.message());
    const size_t here = message.find("counted here: ");
    no->set_reason(here == std::string::npos ? message : message.substr(here + 14));
  }
  // PAPI: its preset events this host can count, and each component, enabled or why not.
  CollectorInfo* papi = info->add_collectors();
  papi->set_name("papi");
  const absl::Status papi_status = core::PapiStatus();
  papi->set_available(papi_status.ok());
  if (!papi_status.ok()) papi->set_reason(std::string(papi_status.message()));
  for (const std::string& preset : core::PapiAvailablePresets()) papi->add_metrics(preset);
  for (const core::PapiComponent& c : core::PapiComponents()) {
    kprof::v1::CollectorComponent* component = papi->add_components();
    component->set_name(c.name);
    component->set_enabled(c.enabled);
    component->set_reason(c.reason);
  }
  // RAPL is listed where the host has it at all; unavailable when it is not readable here.
  if (device.type == base::DeviceType::kCpu) {
    if (const std::vector<core::RaplDomain> domains = core::DiscoverRaplDomains();
        !domains.empty()) {
      CollectorInfo* rapl = info->add_collectors();
      rapl->set_name("rapl");
      rapl->set_available(true);
      for (const core::RaplDomain& d : domains) {
        rapl->add_metrics(core::RaplEnergyMetric(d.name));
        rapl->add_metrics(core::RaplPowerMetric(d.name));
      }
    } else if (core::HasRaplZones()) {
      CollectorInfo* rapl = info->add_collectors();
      rapl->set_name("rapl");
      rapl->set_available(false);
      rapl->set_reason(core::RaplUnavailableReason());
    }
  }
  // NVML measures GPUs; listed where the host has it (not on Jetson boards).
  if (device.type == base::DeviceType::kCuda && nvml) {
    CollectorInfo* nvml_info = info->add_collectors();
    nvml_info->set_name("nvml");
    nvml_info->set_available(true);
    for (const char* m : {"GPU energy (mJ)", "GPU power (W)", "SM clock before (MHz)",
                          "SM clock after (MHz)", "Memory clock before (MHz)",
                          "Memory clock after (MHz)", "GPU temperature (C)", "Throttle reasons"}) {
      nvml_info->add_metrics(m);
    }
  }
  // Jetson boards' INA3221 rails: listed where the board has them.
  if (core::HasTegraRails()) {
    CollectorInfo* rails = info->add_collectors();
    rails->set_name("rails");
    const std::vector<core::TegraRail> found = core::DiscoverTegraRails();
    rails->set_available(!found.empty());
    if (found.empty()) rails->set_reason(core::TegraRailsUnavailableReason());
    for (const core::TegraRail& r : found) {
      rails->add_metrics(core::RailEnergyMetric(r.name));
      rails->add_metrics(core::RailPowerMetric(r.name));
    }
  }
}

// One thread's copy bandwidth, bytes read and written a second (1e9 a second): the fastest of
// `rounds` rounds of `copies` copies between two buffers of `bytes`, touched first.
double CopyGbps(size_t bytes, int copies, int rounds) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  double best = 0;
  for (int round = 0; round < rounds; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < copies; ++c) {
      std::memcpy(to.data(), from.data(), bytes);
      from[static_cast<size_t>(c) % bytes] = to[0];  // each copy depends on the one before it
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) * copies / seconds);
  }
  return best / 1e9;
}

}  // namespace

HostDescription DescribeCpu() {
  HostDescription host;
  DeviceInfo* info = host.add_devices();
  const base::Device cpu{base::DeviceType::kCpu, 0};
  SetDevice(cpu, info);
  info->set_name("cpu");
  info->set_cpu_model(CpuModel());
  info->set_cpus(core::AvailableCpus());
  AddCollectors(cpu, /*nvml=*/false, info);
  // The peaks a strict job's speed is held to: through memory (buffers past any last-level
  // cache) and within the caches (16 KiB, in a core's first level: the most lenient).
  info->set_peak_bandwidth_gbps(CopyGbps(size_t{64} << 20, 2, 3));
  info->set_cache_bandwidth_gbps(CopyGbps(size_t{16} << 10, 2000, 5));
  return host;
}

HostDescription DescribeCuda() {
  HostDescription host;
  const absl::StatusOr<core::CudaInventory> cuda = core::CudaDevices();
  if (!cuda.ok()) {
    host.set_cuda_unavailable(std::string(cuda.status().message()));
    return host;
  }
  bool nvml = false;
  if (!cuda->devices.empty()) {
    core::NvmlCollector probe;
    nvml = probe.Init({}).ok();
  }
  std::vector<std::string> gpus;
  for (const core::CudaDeviceInfo& d : cuda->devices) {
    DeviceInfo* info = host.add_devices();
    const base::Device gpu{base::DeviceType::kCuda, d.id};
    SetDevice(gpu, info);
    info->set_name(d.name);
    info->set_compute_capability(absl::StrCat(d.compute_major, ".", d.compute_minor));
    info->set_multiprocessors(d.multiprocessors);
    info->set_memory_bytes(d.memory_bytes);
    info->set_clock_mhz(d.clock_khz / 1000);
    info->set_memory_clock_mhz(d.memory_clock_khz / 1000);
    info->set_memory_bus_bits(d.memory_bus_bits);
    info->set_l2_bytes(d.l2_bytes);
    info->set_pci_bus_id(d.pci_bus_id);
    info->set_peak_bandwidth_gbps(d.PeakBandwidthGBps());
    info->set_driver_version(core::CudaVersionText(cuda->driver_version));
    AddCollectors(gpu, nvml, info);
    gpus.push_back(absl::StrCat("cuda:", d.id, " ", d.name, " (sm_", d.compute_major,
                                d.compute_minor, ", ", d.multiprocessors, " SMs, ",
                                d.memory_bytes >> 20, " MiB)"));
  }
  host.set_cuda(absl::StrCat("driver ", core::CudaVersionText(cuda->driver_version), ": ",
                             absl::StrJoin(gpus, "; ")));
  return host;
}

}  // namespace kprof::server

#include "core/collectors/nvml_collector.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "core/cuda/cuda_devices.h"

namespace kprof::core {

// The part of NVML's C API kprofd uses, declared from NVIDIA's documentation: an opaque device
// handle, int results (0 is NVML_SUCCESS), and the enums' values.
namespace nvml {
using Device = struct nvmlDevice_st*;
using Return = int;
constexpr Return kSuccess = 0;
constexpr int kClockSm = 1, kClockMem = 2;  // nvmlClockType_t
constexpr int kTemperatureGpu = 0;          // nvmlTemperatureSensors_t
// nvmlProcessInfo_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it.
struct ProcessInfo {
  unsigned pid;
  unsigned long long used_gpu_memory;  // NOLINT(google-runtime-int): NVML's type
  unsigned gpu_instance_id;
  unsigned compute_instance_id;
};
}  // namespace nvml

class NvmlLibrary {
 public:
  static absl::StatusOr<std::unique_ptr<NvmlLibrary>> Open(const std::string& path) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* error = dlerror();
      return absl::FailedPreconditionError(absl::StrCat(
          path, " not found (no NVIDIA driver with NVML on this host): ", error ? error : ""));
    }
    std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary(handle));
    const auto bind = [&](const char* name, auto& entry) -> bool {
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(dlsym(handle, name));
      return entry != nullptr;
    };
    for (const auto& [name, ok] :
         {std::pair{"nvmlInit_v2", bind("nvmlInit_v2", lib->init)},
          std::pair{"nvmlShutdown", bind("nvmlShutdown", lib->shutdown)},
          std::pair{"nvmlErrorString", bind("nvmlErrorString", lib->error_string)},
          std::pair{"nvmlDeviceGetHandleByIndex_v2",
                    bind("nvmlDeviceGetHandleByIndex_v2", lib->handle_by_index)},
          std::pair{"nvmlDeviceGetTotalEnergyConsumption",
                    bind("nvmlDeviceGetTotalEnergyConsumption", lib->total_energy)},
          std::pair{"nvmlDeviceGetClockInfo", bind("nvmlDeviceGetClockInfo", lib->clock_info)},
          std::pair{"nvmlDeviceGetTemperature", bind("nvmlDeviceGetTemperature", lib->temperature)},
          std::pair{"nvmlDeviceGetCurrentClocksThrottleReasons",
                    bind("nvmlDeviceGetCurrentClocksThrottleReasons", lib->throttle_reasons)},
          std::pair{"nvmlDeviceGetHandleByPciBusId_v2",
                    bind("nvmlDeviceGetHandleByPciBusId_v2", lib->handle_by_pci)}}) {
      if (!ok) {
        return absl::FailedPreconditionError(
            absl::StrCat(path, " has no ", name, ": not NVML, or an NVML too old"));
      }
    }
    // For the manifest only: an NVML without them leaves those fields out.
    bind("nvmlDeviceGetPersistenceMode", lib->persistence_mode);
    bind("nvmlDeviceGetComputeRunningProcesses_v3", lib->compute_processes);
    bind("nvmlDeviceGetMaxClockInfo", lib->max_clock_info);
    // For a lease's clock locking only.
    bind("nvmlDeviceGetDefaultApplicationsClock", lib->default_app_clock);
    bind("nvmlDeviceSetGpuLockedClocks", lib->set_locked_clocks);
    bind("nvmlDeviceResetGpuLockedClocks", lib->reset_locked_clocks);
    if (const nvml::Return r = lib->init(); r != nvml::kSuccess) {
      return absl::FailedPreconditionError(absl::StrCat("nvmlInit_v2: ", lib->Error(r)));
    }
    lib->initialised_ = true;
    return lib;
  }

  ~NvmlLibrary() {
    if (initialised_) shutdown();
    dlclose(handle_);
  }

  std::string Error(nvml::Return r) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    return text != nullptr ? text : absl::StrCat("NVML error ", r);
  }

  nvml::Return (*init)() = nullptr;
  nvml::Return (*shutdown)() = nullptr;
  const char* (*error_string)(nvml::Return) = nullptr;
  nvml::Return (*handle_by_index)(unsigned, nvml::Device*) = nullptr;
  nvml::Return (*total_energy)(nvml::Device, unsigned long long*) = nullptr;  // NOLINT: NVML's
  nvml::Return (*clock_info)(nvml::Device, int, unsigned*) = nullptr;
  nvml::Return (*temperature)(nvml::Device, int, unsigned*) = nullptr;
  nvml::Return (*throttle_reasons)(nvml::Device, unsigned long long*) = nullptr;  // NOLINT
  nvml::Return (*handle_by_pci)(const char*, nvml::Device*) = nullptr;
  nvml::Return (*persistence_mode)(nvml::Device, int*) = nullptr;
  nvml::Return (*compute_processes)(nvml::Device, unsigned*, nvml::ProcessInfo*) = nullptr;
  nvml::Return (*max_clock_info)(nvml::Device, int, unsigned*) = nullptr;
  nvml::Return (*default_app_clock)(nvml::Device, int, unsigned*) = nullptr;
  nvml::Return (*set_locked_clocks)(nvml::Device, unsigned, unsigned) = nullptr;
  nvml::Return (*reset_locked_clocks)(nvml::Device) = nullptr;

  // The NVML device of cuda:`ordinal`: by PCI bus id, which is right whatever order CUDA
  // numbers devices in (CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER), or by index without CUDA.
  absl::StatusOr<nvml::Device> Find(int ordinal) const {
    nvml::Device handle = nullptr;
    if (absl::StatusOr<std::string> bus = CudaPciBusId(ordinal); bus.ok()) {
      if (const nvml::Return r = handle_by_pci(bus->c_str(), &handle); r != nvml::kSuccess) {
        return absl::FailedPreconditionError(
            absl::StrCat("nvmlDeviceGetHandleByPciBusId_v2(", *bus, "): ", Error(r)));
      }
      return handle;
    }
    if (const nvml::Return r = handle_by_index(static_cast<unsigned>(ordinal), &handle);
        r != nvml::kSuccess) {
      return absl::FailedPreconditionError(
          absl::StrCat("nvmlDeviceGetHandleByIndex_v2(", ordinal, "): ", Error(r)));
    }
    return handle;
  }

 private:
  explicit NvmlLibrary(void* handle) : handle_(handle) {}
  void* handle_;
  bool initialised_ = false;
};

std::vector<std::string> ThrottleReasonNames(uint64_t mask) {
  static constexpr std::pair<uint64_t, const char*> kReasons[] = {
      {0x1, "GpuIdle"},
      {0x2, "ApplicationsClocksSetting"},
      {0x4, "SwPowerCap"},
      {0x8, "HwSlowdown"},
      {0x10, "SyncBoost"},
      {0x20, "SwThermalSlowdown"},
      {0x40, "HwThermalSlowdown"},
      {0x80, "HwPowerBrakeSlowdown"},
      {0x100, "DisplayClockSetting"},
  };
  std::vector<std::string> names;
  for (const auto& [bit, name] : kReasons) {
    if (mask & bit) names.emplace_back(name);
    mask &= ~bit;
  }
  if (mask != 0) names.push_back(absl::StrFormat("0x%x", mask));
  return names;
}

namespace {

// Clocks, temperature and throttle reasons at one moment; what NVML cannot say stays unset.
struct GpuState {
  unsigned sm_mhz = 0, memory_mhz = 0, temperature_c = 0;
  uint64_t throttle = 0;
  bool has_clocks = false, has_temperature = false, has_throttle = false;
};

GpuState ReadState(const NvmlLibrary& nvml, nvml::Device device) {
  GpuState s;
  s.has_clocks = nvml.clock_info(device, nvml::kClockSm, &s.sm_mhz) == nvml::kSuccess &&
                 nvml.clock_info(device, nvml::kClockMem, &s.memory_mhz) == nvml::kSuccess;
  s.has_temperature =
      nvml.temperature(device, nvml::kTemperatureGpu, &s.temperature_c) == nvml::kSuccess;
  unsigned long long reasons = 0;  // NOLINT(google-runtime-int): NVML's type
  s.has_throttle = nvml.throttle_reasons(device, &reasons) == nvml::kSuccess;
  s.throttle = reasons;
  return s;
}

class NvmlMeasurement final : public MetricCollector::Measurement {
 public:
  NvmlMeasurement(const NvmlLibrary* nvml, nvml::Device device, uint64_t energy_mj, GpuState before)
      : nvml_(nvml),
        device_(device),
        energy_mj_(energy_mj),
        before_(before),
        began_(std::chrono::steady_clock::now()) {}

  absl::StatusOr<report::MetricMap> Stop() override {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
    unsigned long long energy = 0;  // NOLINT(google-runtime-int): NVML's type
    if (const nvml::Return r = nvml_->total_energy(device_, &energy); r != nvml::kSuccess) {
      return absl::UnavailableError(
          absl::StrCat("nvmlDeviceGetTotalEnergyConsumption: ", nvml_->Error(r)));
    }
    const GpuState after = ReadState(*nvml_, device_);
    const uint64_t used = energy >= energy_mj_ ? energy - energy_mj_ : 0;
    report::MetricMap m;
    m["GPU energy (mJ)"] = report::Count{static_cast<int64_t>(used)};
    if (seconds > 0) m["GPU power (W)"] = report::Ratio{static_cast<double>(used) / 1e3 / seconds};
    if (before_.has_clocks && after.has_clocks) {
      m["SM clock before (MHz)"] = report::Count{before_.sm_mhz};
      m["SM clock after (MHz)"] = report::Count{after.sm_mhz};
      m["Memory clock before (MHz)"] = report::Count{before_.memory_mhz};
      m["Memory clock after (MHz)"] = report::Count{after.memory_mhz};
    }
    if (after.has_temperature) m["GPU temperature (C)"] = report::Count{after.temperature_c};
    if (before_.has_throttle && after.has_throttle) {
      const std::vector<std::string> names = ThrottleReasonNames(before_.throttle | after.throttle);
      std::string text;
      for (const std::string& n : names) absl::StrAppend(&text, text.empty() ? "" : ", ", n);
      m["Throttle reasons"] = text.empty() ? std::string("none") : text;
    }
    return m;
  }

 private:
  const NvmlLibrary* nvml_;
  nvml::Device device_;
  uint64_t energy_mj_;
  GpuState before_;
  std::chrono::steady_clock::time_point began_;
};

}  // namespace

NvmlCollector::NvmlCollector(std::string library) : library_path_(std::move(library)) {}
NvmlCollector::~NvmlCollector() = default;

absl::Status NvmlCollector::Init(const std::vector<base::Device>&) {
  if (library_ != nullptr) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<NvmlLibrary>> opened = NvmlLibrary::Open(library_path_);
  if (!opened.ok()) return opened.status();
  library_ = *std::move(opened);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricCollector::Measurement>> NvmlCollector::Start(
    base::Device device) {
  if (device.type != base::DeviceType::kCuda) return nullptr;
  if (library_ == nullptr) return absl::FailedPreconditionError("collector 'nvml' not initialised");
  absl::StatusOr<nvml::Device> found = library_->Find(device.id);
  if (!found.ok()) return found.status();
  nvml::Device handle = *found;
  unsigned long long energy = 0;  // NOLINT(google-runtime-int): NVML's type
  if (const nvml::Return r = library_->total_energy(handle, &energy); r != nvml::kSuccess) {
    return absl::FailedPreconditionError(
        absl::StrCat("nvmlDeviceGetTotalEnergyConsumption: ", library_->Error(r),
                     " (the total-energy counter needs a Volta or newer GPU)"));
  }
  return std::make_unique<NvmlMeasurement>(library_.get(), handle, energy,
                                           ReadState(*library_, handle));
}

namespace {

// nvmlInit can take a good fraction of a second without persistence mode: each library is
// opened once per process, and kept.
const absl::StatusOr<std::unique_ptr<NvmlLibrary>>& SharedNvml(const std::string& library) {
  static absl::Mutex mutex;
  static auto* opened = new std::map<std::string, absl::StatusOr<std::unique_ptr<NvmlLibrary>>>();
  absl::MutexLock lock(&mutex);
  auto it = opened->find(library);
  if (it == opened->end()) it = opened->emplace(library, NvmlLibrary::Open(library)).first;
  return it->second;
}

}  // namespace

ThrottleMonitor GpuThrottleMonitor(double threshold, int ordinal, const std::string& library) {
  WatchedClock clock;
  clock.name = "GPU";
  clock.idle_reasons = kNvmlGpuIdle;
  const absl::StatusOr<std::unique_ptr<NvmlLibrary>>& nvml = SharedNvml(library);
  if (!nvml.ok()) {
    clock.unavailable = absl::StrCat("the GPU's clock cannot be read: ", nvml.status().message());
    return ThrottleMonitor(threshold, std::move(clock));
  }
  const absl::StatusOr<nvml::Device> device = (*nvml)->Find(ordinal);
  const NvmlLibrary* lib = nvml->get();
  unsigned max_sm = 0;
  if (!device.ok()) {
    clock.unavailable = absl::StrCat("the GPU's clock cannot be read: ", device.status().message());
  } else if (lib->max_clock_info == nullptr ||
             lib->max_clock_info(*device, nvml::kClockSm, &max_sm) != nvml::kSuccess ||
             max_sm == 0) {
    clock.unavailable = "the GPU's nominal clock is unknown (NVML gives no maximum SM clock)";
  } else {
    const nvml::Device handle = *device;
    clock.nominal_khz = int64_t{max_sm} * 1000;
    clock.read_khz = [lib, handle]() -> int64_t {
      unsigned mhz = 0;
      return lib->clock_info(handle, nvml::kClockSm, &mhz) == nvml::kSuccess ? int64_t{mhz} * 1000
                                                                             : -1;
    };
    clock.read_reasons = [lib, handle]() -> uint64_t {
      unsigned long long reasons = 0;  // NOLINT(google-runtime-int): NVML's type
      return lib->throttle_reasons(handle, &reasons) == nvml::kSuccess ? reasons : 0;
    };
    if (clock.read_khz() < 0) clock.unavailable = "the GPU's SM clock cannot be read through NVML";
  }
  return ThrottleMonitor(threshold, std::move(clock));
}

absl::StatusOr<GpuClocks> ReadGpuClocks(int ordinal, const std::string& library) {
  const absl::StatusOr<std::unique_ptr<NvmlLibrary>>& nvml = SharedNvml(library);
  if (!nvml.ok()) return nvml.status();
  KPROF_ASSIGN_OR_RETURN(const nvml::Device device, (*nvml)->Find(ordinal));
  const NvmlLibrary& lib = **nvml;
  GpuClocks clocks;
  const auto mhz = [&](auto* entry, int type) -> int64_t {
    unsigned value = 0;
    return entry != nullptr && entry(device, type, &value) == nvml::kSuccess && value > 0
               ? int64_t{value}
               : -1;
  };
  clocks.sm_mhz = mhz(lib.clock_info, nvml::kClockSm);
  clocks.memory_mhz = mhz(lib.clock_info, nvml::kClockMem);
  clocks.max_sm_mhz = mhz(lib.max_clock_info, nvml::kClockSm);
  clocks.base_sm_mhz = mhz(lib.default_app_clock, nvml::kClockSm);
  if (absl::StatusOr<std::string> bus = CudaPciBusId(ordinal); bus.ok()) clocks.pci_bus_id = *bus;
  return clocks;
}

namespace {

// NVML_ERROR_NO_PERMISSION and NVML_ERROR_NOT_SUPPORTED as statuses that say so.
absl::Status NvmlCallError(const NvmlLibrary& lib, const char* call, nvml::Return r) {
  const std::string text = absl::StrCat(call, ": ", lib.Error(r));
  if (r == 4) return absl::PermissionDeniedError(text);
  if (r == 3) return absl::UnimplementedError(text);
  return absl::FailedPreconditionError(text);
}

}  // namespace

absl::Status LockGpuClocks(int ordinal, int64_t mhz, const std::string& library) {
  const absl::StatusOr<std::unique_ptr<NvmlLibrary>>& nvml = SharedNvml(library);
  if (!nvml.ok()) return nvml.status();
  const NvmlLibrary& lib = **nvml;
  if (lib.set_locked_clocks == nullptr) {
    return absl::UnimplementedError(
        "this NVML cannot lock clocks (no nvmlDeviceSetGpuLockedClocks)");
  }
  KPROF_ASSIGN_OR_RETURN(const nvml::Device device, lib.Find(ordinal));
  const auto at = static_cast<unsigned>(mhz);
  if (const nvml::Return r = lib.set_locked_clocks(device, at, at); r != nvml::kSuccess) {
    return NvmlCallError(lib, "nvmlDeviceSetGpuLockedClocks", r);
  }
  return absl::OkStatus();
}

absl::Status ResetGpuClocks(int ordinal, const std::string& pci_bus_id,
                            const std::string& library) {
  const absl::StatusOr<std::unique_ptr<NvmlLibrary>>& nvml = SharedNvml(library);
  if (!nvml.ok()) return nvml.status();
  const NvmlLibrary& lib = **nvml;
  if (lib.reset_locked_clocks == nullptr) {
    return absl::UnimplementedError(
        "this NVML cannot reset locked clocks (no nvmlDeviceResetGpuLockedClocks)");
  }
  nvml::Device device = nullptr;
  if (!pci_bus_id.empty()) {
    if (const nvml::Return r = lib.handle_by_pci(pci_bus_id.c_str(), &device);
        r != nvml::kSuccess) {
      return NvmlCallError(lib, "nvmlDeviceGetHandleByPciBusId_v2", r);
    }
  } else {
    KPROF_ASSIGN_OR_RETURN(device, lib.Find(ordinal));
  }
  if (const nvml::Return r = lib.reset_locked_clocks(device); r != nvml::kSuccess) {
    return NvmlCallError(lib, "nvmlDeviceResetGpuLockedClocks", r);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<GpuProcess>> GpuComputeProcesses(int ordinal,
                                                            const std::string& library) {
  const absl::StatusOr<std::unique_ptr<NvmlLibrary>>& nvml = SharedNvml(library);
  if (!nvml.ok()) return nvml.status();
  const NvmlLibrary& lib = **nvml;
  if (lib.compute_processes == nullptr) {
    return absl::UnimplementedError(
        "this NVML cannot list a GPU's processes (no nvmlDeviceGetComputeRunningProcesses_v3)");
  }
  KPROF_ASSIGN_OR_RETURN(const nvml::Device device, lib.Find(ordinal));
  // Drivers before R535 write 32-byte entries: room for 64 of those, read as 24-byte ones no
  // further than the count asked for.
  std::vector<nvml::ProcessInfo> listed(64 * 32 / sizeof(nvml::ProcessInfo) + 1);
  unsigned count = 64;
  if (const nvml::Return r = lib.compute_processes(device, &count, listed.data());
      r != nvml::kSuccess) {
    return NvmlCallError(lib, "nvmlDeviceGetComputeRunningProcesses_v3", r);
  }
  std::vector<GpuProcess> processes;
  for (unsigned i = 0; i < count && i < listed.size(); ++i) {
    processes.push_back(
        {static_cast<int>(listed[i].pid), static_cast<int64_t>(listed[i].used_gpu_memory >> 20)});
  }
  return processes;
}

report::MetricMap NvmlManifest(int ordinal, const std::string& library) {
  report::MetricMap m;
  const absl::StatusOr<std::unique_ptr<NvmlLibrary>>& nvml = SharedNvml(library);
  if (!nvml.ok()) {
    m["GPU management (NVML)"] = absl::StrCat("unavailable: ", nvml.status().message());
    return m;
  }
  absl::StatusOr<nvml::Device> device = (*nvml)->Find(ordinal);
  if (!device.ok()) {
    m["GPU management (NVML)"] = absl::StrCat("unavailable: ", device.status().message());
    return m;
  }
  const NvmlLibrary& lib = **nvml;
  const GpuState state = ReadState(lib, *device);
  if (state.has_clocks) {
    m["GPU SM clock (MHz)"] = report::Count{state.sm_mhz};
    m["GPU memory clock (MHz)"] = report::Count{state.memory_mhz};
  }
  unsigned max_sm = 0;
  if (lib.max_clock_info != nullptr &&
      lib.max_clock_info(*device, nvml::kClockSm, &max_sm) == nvml::kSuccess) {
    m["GPU SM clock max (MHz)"] = report::Count{max_sm};
  }
  if (state.has_temperature) m["GPU temperature (C)"] = report::Count{state.temperature_c};
  if (state.has_throttle) {
    const std::vector<std::string> names = ThrottleReasonNames(state.throttle);
    m["GPU throttle reasons"] = names.empty() ? std::string("none") : absl::StrJoin(names, ", ");
  }
  int persistence = 0;
  if (lib.persistence_mode != nullptr &&
      lib.persistence_mode(*device, &persistence) == nvml::kSuccess) {
    m["GPU persistence mode"] = std::string(persistence != 0 ? "on" : "off");
  }
  // Other processes computing on this GPU share it with the measurement.
  if (const absl::StatusOr<std::vector<GpuProcess>> processes =
          GpuComputeProcesses(ordinal, library);
      processes.ok()) {
    std::vector<std::string> others;
    for (const GpuProcess& p : *processes) {
      if (p.pid != getpid())
        others.push_back(absl::StrCat("pid ", p.pid, " (", p.memory_mib, " MiB)"));
    }
    m["GPU other processes"] = others.empty() ? std::string("none") : absl::StrJoin(others, ", ");
  }
  return m;
}

}  // namespace kprof::core

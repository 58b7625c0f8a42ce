// A stand-in for libnvidia-ml.so.1 on hosts without a GPU, for tests only, beside the stand-in
// driver of tests/support/fake_cuda: one GPU of maximum SM clock 1980 MHz that draws 300 W.
//
// Its current SM clock and clock-event reasons are the two numbers in the file named by
// KPROF_FAKE_NVML_STATE ("990 0x40": half its clock, HwThermalSlowdown), read at every call,
// so that a test can throttle the "GPU" under a running daemon; without the file, 1980 MHz and
// no reasons. Any PCI bus id names the one GPU.
//
// Locked clocks (nvmlDeviceSetGpuLockedClocks) are kept in the file beside it, STATE.locked
// ("1590 1590"), which a reset removes, so that they outlive the process that set them as a real
// GPU's do; while they are set, the SM clock reads as their minimum. A file STATE.deny makes
// locking and resetting fail as NVML does for a user who is not root.
//
// The processes computing on the GPU are the lines "PID MIB" of STATE.processes (none without
// it), so that a test can put another process on the "GPU" beside a measurement.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3, kNoPermission = 4;
constexpr unsigned kMaxSmMhz = 1980, kBaseSmMhz = 1590, kMemoryMhz = 2619;
constexpr double kWatts = 300;

struct Device {};
Device the_gpu;

const auto kLoaded = std::chrono::steady_clock::now();

struct State {
  unsigned sm_mhz = kMaxSmMhz;
  unsigned long long reasons = 0;  // NOLINT(google-runtime-int): NVML's type
};

std::string StatePath(const char* suffix) {
  const char* path = std::getenv("KPROF_FAKE_NVML_STATE");
  return path == nullptr ? std::string() : std::string(path) + suffix;
}

bool Exists(const std::string& path) {
  FILE* f = path.empty() ? nullptr : std::fopen(path.c_str(), "r");
  if (f != nullptr) std::fclose(f);
  return f != nullptr;
}

State Read() {
  State state;
  if (const char* path = std::getenv("KPROF_FAKE_NVML_STATE"); path != nullptr) {
    if (FILE* f = std::fopen(path, "r"); f != nullptr) {
      unsigned mhz = 0;
      unsigned long long reasons = 0;  // NOLINT(google-runtime-int)
      if (std::fscanf(f, "%u %llx", &mhz, &reasons) == 2) state = {mhz, reasons};
      std::fclose(f);
    }
  }
  if (FILE* f = std::fopen(StatePath(".locked").c_str(), "r"); f != nullptr) {
    unsigned low = 0, high = 0;
    if (std::fscanf(f, "%u %u", &low, &high) == 2) state.sm_mhz = low;
    std::fclose(f);
  }
  return state;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() { return kSuccess; }
__attribute__((visibility("default"))) int nvmlShutdown() { return kSuccess; }
__attribute__((visibility("default"))) const char* nvmlErrorString(int result) {
  return result == kSuccess ? "Success" : "Fake NVML error";
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         Device** device) {
  if (index != 0 || device == nullptr) return kInvalidArgument;
  *device = &the_gpu;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char* bus,
                                                                            Device** device) {
  if (bus == nullptr || device == nullptr) return kInvalidArgument;
  *device = &the_gpu;
  return kSuccess;
}

// mJ since the library was loaded, at kWatts.
__attribute__((visibility("default"))) int nvmlDeviceGetTotalEnergyConsumption(
    Device*, unsigned long long* mj) {  // NOLINT(google-runtime-int)
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - kLoaded).count();
  *mj = static_cast<unsigned long long>(seconds * kWatts * 1e3);  // NOLINT(google-runtime-int)
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetClockInfo(Device*, int type,
                                                                  unsigned* mhz) {
  if (type == 1) {
    *mhz = Read().sm_mhz;
  } else if (type == 2) {
    *mhz = kMemoryMhz;
  } else {
    return kNotSupported;
  }
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMaxClockInfo(Device*, int type,
                                                                     unsigned* mhz) {
  if (type != 1 && type != 2) return kNotSupported;
  *mhz = type == 1 ? kMaxSmMhz : kMemoryMhz;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetTemperature(Device*, int,
                                                                    unsigned* celsius) {
  *celsius = 45;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetCurrentClocksThrottleReasons(
    Device*, unsigned long long* reasons) {  // NOLINT(google-runtime-int)
  *reasons = Read().reasons;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceGetPersistenceMode(Device*, int* mode) {
  *mode = 1;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetDefaultApplicationsClock(Device*, int type,
                                                                                 unsigned* mhz) {
  if (type != 1 && type != 2) return kNotSupported;
  *mhz = type == 1 ? kBaseSmMhz : kMemoryMhz;
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceSetGpuLockedClocks(Device*, unsigned low,
                                                                        unsigned high) {
  if (Exists(StatePath(".deny"))) return kNoPermission;
  if (low > high || high > kMaxSmMhz) return kInvalidArgument;
  const std::string path = StatePath(".locked");
  if (path.empty()) return kNotSupported;
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return kNotSupported;
  std::fprintf(f, "%u %u\n", low, high);
  std::fclose(f);
  return kSuccess;
}
__attribute__((visibility("default"))) int nvmlDeviceResetGpuLockedClocks(Device*) {
  if (Exists(StatePath(".deny"))) return kNoPermission;
  const std::string path = StatePath(".locked");
  if (!path.empty()) std::remove(path.c_str());
  return kSuccess;
}

// nvmlProcessInfo_t of NVML 12 (R535 on).
struct ProcessInfo {
  unsigned pid;
  unsigned long long used_gpu_memory;  // NOLINT(google-runtime-int): NVML's type
  unsigned gpu_instance_id;
  unsigned compute_instance_id;
};

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(
    Device*, unsigned* count, ProcessInfo* infos) {
  if (count == nullptr) return kInvalidArgument;
  unsigned listed = 0;
  if (FILE* f = std::fopen(StatePath(".processes").c_str(), "r"); f != nullptr) {
    unsigned pid = 0, mib = 0;
    while (std::fscanf(f, "%u %u", &pid, &mib) == 2) {
      if (listed < *count && infos != nullptr) {
        infos[listed] = {pid, static_cast<unsigned long long>(mib) << 20, 0, 0};  // NOLINT
      }
      ++listed;
    }
    std::fclose(f);
  }
  const bool fits = listed <= *count;
  *count = listed;
  return fits ? kSuccess : 7;  // NVML_ERROR_INSUFFICIENT_SIZE
}

}  // extern "C"

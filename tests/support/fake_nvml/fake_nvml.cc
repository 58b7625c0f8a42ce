// A stand-in for libnvidia-ml.so.1 on hosts without a GPU, for tests only, beside the stand-in
// driver of tests/support/fake_cuda: one GPU of maximum SM clock 1980 MHz that draws 300 W.
//
// Its current SM clock and clock-event reasons are the two numbers in the file named by
// KPROF_FAKE_NVML_STATE ("990 0x40": half its clock, HwThermalSlowdown), read at every call,
// so that a test can throttle the "GPU" under a running daemon; without the file, 1980 MHz and
// no reasons. Any PCI bus id names the one GPU.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kSuccess = 0, kInvalidArgument = 2, kNotSupported = 3;
constexpr unsigned kMaxSmMhz = 1980, kMemoryMhz = 2619;
constexpr double kWatts = 300;

struct Device {};
Device the_gpu;

const auto kLoaded = std::chrono::steady_clock::now();

struct State {
  unsigned sm_mhz = kMaxSmMhz;
  unsigned long long reasons = 0;  // NOLINT(google-runtime-int): NVML's type
};

State Read() {
  State state;
  const char* path = std::getenv("KPROF_FAKE_NVML_STATE");
  if (path == nullptr) return state;
  if (FILE* f = std::fopen(path, "r"); f != nullptr) {
    unsigned mhz = 0;
    unsigned long long reasons = 0;  // NOLINT(google-runtime-int)
    if (std::fscanf(f, "%u %llx", &mhz, &reasons) == 2) state = {mhz, reasons};
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

}  // extern "C"

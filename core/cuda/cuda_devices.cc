#include "core/cuda/cuda_devices.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "kprof/config.h"

#if KPROF_HAS_CUDA
#include "core/cuda/cuda_driver.h"
#endif

namespace kprof::core {

std::string CudaVersionText(int version) {
  return absl::StrCat(version / 1000, ".", version % 1000 / 10);
}

#if KPROF_HAS_CUDA

namespace {

absl::StatusOr<CudaDeviceInfo> Describe(CudaDriver* cu, int ordinal) {
  CudaDeviceInfo info;
  info.id = ordinal;
  CUdevice device = 0;
  KPROF_CU(cu, DeviceGet(&device, ordinal));
  char name[256] = {0};
  KPROF_CU(cu, DeviceGetName(name, sizeof name - 1, device));
  info.name = name;
  KPROF_CU(cu, DeviceGetAttribute(&info.compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                  device));
  KPROF_CU(cu, DeviceGetAttribute(&info.compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                  device));
  KPROF_CU(cu, DeviceGetAttribute(&info.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                  device));
  KPROF_CU(cu, DeviceGetAttribute(&info.max_threads_per_block,
                                  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device));
  KPROF_CU(cu, DeviceGetAttribute(&info.l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device));
  // Rated clocks: informative only, so a driver that no longer reports them leaves them 0.
  (void)cu->DeviceGetAttribute(&info.clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device);
  (void)cu->DeviceGetAttribute(&info.memory_clock_khz, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE,
                               device);
  (void)cu->DeviceGetAttribute(&info.memory_bus_bits, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
                               device);
  char bus[32] = {0};
  if (cu->DeviceGetPCIBusId(bus, sizeof bus - 1, device) == CUDA_SUCCESS) info.pci_bus_id = bus;
  size_t bytes = 0;
  KPROF_CU(cu, DeviceTotalMem(&bytes, device));
  info.memory_bytes = bytes;
  return info;
}

}  // namespace

absl::StatusOr<std::string> CudaPciBusId(int ordinal) {
  KPROF_ASSIGN_OR_RETURN(CudaDriver * cu, CudaDriver::Get());
  CUdevice device = 0;
  KPROF_CU(cu, DeviceGet(&device, ordinal));
  char bus[32] = {0};
  KPROF_CU(cu, DeviceGetPCIBusId(bus, sizeof bus - 1, device));
  return std::string(bus);
}

absl::StatusOr<CudaInventory> CudaDevices() {
  absl::StatusOr<CudaDriver*> cu = CudaDriver::Get();
  if (!cu.ok()) return cu.status();
  CudaInventory inventory;
  KPROF_CU(*cu, DriverGetVersion(&inventory.driver_version));
  int count = 0;
  KPROF_CU(*cu, DeviceGetCount(&count));
  if (count == 0) return absl::FailedPreconditionError("the CUDA driver reports no device");
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<CudaDeviceInfo> info = Describe(*cu, i);
    if (!info.ok()) return info.status();
    inventory.devices.push_back(*std::move(info));
  }
  return inventory;
}

#else

absl::StatusOr<std::string> CudaPciBusId(int) {
  return absl::FailedPreconditionError("this kprofd was built without CUDA");
}

absl::StatusOr<CudaInventory> CudaDevices() {
  return absl::FailedPreconditionError(
      "this kprofd was built without CUDA (the CUDA toolkit was not found at build time)");
}

#endif

}  // namespace kprof::core

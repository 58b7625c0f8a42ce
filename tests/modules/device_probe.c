/* Where a host function's arguments live on a CUDA device: 0 when the first is a tensor in
   device memory (kDLCUDA) and the second a scalar in host memory, 1 otherwise. */
#include <kprof/module_abi.h>

KPROF_EXPORT int32_t on_cuda(DLTensor* args, int32_t num_args) {
  if (num_args != 2) return 1;
  if (args[0].device.device_type != kDLCUDA || args[0].ndim != 1) return 1;
  if (args[1].device.device_type != kDLCPU || args[1].ndim != 0) return 1;
  return *(const int64_t*)args[1].data == 3 ? 0 : 1;
}

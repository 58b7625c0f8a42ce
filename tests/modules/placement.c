/* What a module function sees of the placement of its arguments. */
#include <kprof/module_abi.h>
#include <stdint.h>

/* at_offsets(int64 packed, int64 boundary, tensors...): returns 0 when tensor k (from the
 * third argument on) lies (packed >> 12k) & 4095 bytes past a multiple of `boundary`, else
 * 10 + k for the first that does not. */
KPROF_EXPORT int32_t at_offsets(DLTensor* args, int32_t num_args) {
  if (num_args < 2 || args[0].ndim != 0 || args[1].ndim != 0) return 1;
  const int64_t packed = *(const int64_t*)args[0].data;
  const uint64_t boundary = (uint64_t) * (const int64_t*)args[1].data;
  if (boundary == 0) return 2;
  for (int32_t k = 2; k < num_args; ++k) {
    const uint64_t want = ((uint64_t)packed >> (12 * (k - 2))) & 4095;
    if ((uintptr_t)args[k].data % boundary != want) return 10 + k;
  }
  return 0;
}

/* y = a * x + b, with a a float32 scalar and b an int64 scalar (0-d tensors). */
#include <kprof/module_abi.h>

KPROF_EXPORT int32_t axpb(DLTensor* args, int32_t num_args) {
  if (num_args != 4 || args[2].ndim != 0 || args[3].ndim != 0) return 1;
  float* y = (float*)args[0].data;
  const float* x = (const float*)args[1].data;
  const float a = *(const float*)args[2].data;
  const int64_t b = *(const int64_t*)args[3].data;
  for (int64_t i = 0; i < kprof_num_elements(&args[0]); ++i) y[i] = a * x[i] + (float)b;
  return 0;
}

/* c = a + b over float32 vectors of one length. */
#include <kprof/module_abi.h>

KPROF_EXPORT int32_t vadd(DLTensor* args, int32_t num_args) {
  if (num_args != 3) return 1;
  const float* a = (const float*)args[0].data;
  const float* b = (const float*)args[1].data;
  float* c = (float*)args[2].data;
  const int64_t n = kprof_num_elements(&args[2]);
  if (kprof_num_elements(&args[0]) != n || kprof_num_elements(&args[1]) != n) return 2;
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  return 0;
}

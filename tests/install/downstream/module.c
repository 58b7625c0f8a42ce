/* A module built by a project outside kprofd, against the installed <kprof/module_abi.h>. */
#include <kprof/module_abi.h>

/* x *= 2; arguments: float32 x[n] */
KPROF_EXPORT int32_t twice(DLTensor* args, int32_t num_args) {
  if (num_args != 1) return 1;
  float* x = (float*)args[0].data;
  for (int64_t i = 0; i < kprof_num_elements(&args[0]); ++i) x[i] *= 2.0f;
  return 0;
}

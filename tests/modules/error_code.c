/* Fails the way a candidate kernel reports bad input: a non-zero return. */
#include <kprof/module_abi.h>

KPROF_EXPORT int32_t fails(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 7;
}

KPROF_EXPORT int32_t succeeds(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 0;
}

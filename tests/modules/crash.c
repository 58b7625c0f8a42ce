/* Dies the way a broken candidate kernel does. */
#include <kprof/module_abi.h>
#include <stdlib.h>

KPROF_EXPORT int32_t segfault(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  volatile int* nowhere = (volatile int*)0;
  return *nowhere;
}

KPROF_EXPORT int32_t aborts(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  abort();
}

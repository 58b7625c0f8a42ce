/* Links against a function that nothing defines: dlopen with RTLD_NOW must refuse it. */
#include <kprof/module_abi.h>

extern int32_t kprof_test_symbol_nobody_defines(void);

KPROF_EXPORT int32_t calls_missing(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return kprof_test_symbol_nobody_defines();
}

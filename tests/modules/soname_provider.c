/* A module that declares a SONAME, and one that needs it: loaded after the first, the second
 * would be linked to the first one's code. */
#include <kprof/module_abi.h>

#ifdef CONSUMER
int32_t provided(void);
KPROF_EXPORT int32_t consumes(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return provided();
}
#else
KPROF_EXPORT int32_t provided(void) { return 7; }
#endif

/* Twelve functions, so that a NOT_FOUND message lists only the first few. */
#include <kprof/module_abi.h>

#define KPROF_TEST_FUNCTION(name)                        \
  KPROF_EXPORT int32_t name(DLTensor* args, int32_t n) { \
    (void)args;                                          \
    return n;                                            \
  }

KPROF_TEST_FUNCTION(f00)
KPROF_TEST_FUNCTION(f01)
KPROF_TEST_FUNCTION(f02)
KPROF_TEST_FUNCTION(f03)
KPROF_TEST_FUNCTION(f04)
KPROF_TEST_FUNCTION(f05)
KPROF_TEST_FUNCTION(f06)
KPROF_TEST_FUNCTION(f07)
KPROF_TEST_FUNCTION(f08)
KPROF_TEST_FUNCTION(f09)
KPROF_TEST_FUNCTION(f10)
KPROF_TEST_FUNCTION(f11)

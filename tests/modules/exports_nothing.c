/* A shared object whose functions are all hidden: nothing a client could call. */
#include <stdint.h>

__attribute__((visibility("hidden"))) int32_t hidden_function(void) { return 1; }

static int32_t local_function(void) { return 2; }

int32_t (*const kprof_test_keep)(void) __attribute__((visibility("hidden"))) = local_function;

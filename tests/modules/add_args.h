/* The arguments of the test modules' c = a + b kernels (answers.c, cheats.c): float32 vectors
 * c, a and b of one length n; a call with others returns 1 or 2. */
#pragma once

#include <kprof/module_abi.h>

#define ADD_ARGS                                  \
  if (num_args != 3) return 1;                    \
  float* c = (float*)args[0].data;                \
  float* a = (float*)args[1].data;                \
  float* b = (float*)args[2].data;                \
  const int64_t n = kprof_num_elements(&args[0]); \
  if (kprof_num_elements(&args[1]) != n || kprof_num_elements(&args[2]) != n) return 2;

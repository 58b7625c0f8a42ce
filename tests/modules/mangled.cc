// A C++ kernel exported without extern "C": the loader finds it only by its mangled name
// (_Z8my_saxpyP8DLTensori), and a call of my_saxpy is told why.
#include <cstdint>

#include "kprof/module_abi.h"

__attribute__((visibility("default"))) int32_t my_saxpy(DLTensor* args, int32_t num_args) {
  (void)args;
  return num_args == 3 ? 0 : -1;
}

// A C++ module whose state g++ gives GNU-unique binding (a static local of an inline function
// with default visibility): the loader would share it with every module defining it.
#include <kprof/module_abi.h>

__attribute__((visibility("default"))) inline int& Counter() {
  static int count = 0;
  return count;
}

KPROF_EXPORT int32_t counts(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return ++Counter();
}

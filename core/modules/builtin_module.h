// The module "builtin": kernels compiled into kprofd, with the same ABI as uploaded modules, for
// calibration, demos and self-tests. Always present.
//
//   spin_us(float64 us)             busy-waits `us` microseconds on the steady clock
//   sleep_us(float64 us)            sleeps `us` microseconds
//   copy(dst, src)                  copies src's bytes into dst (same type and size)
//   fill(dst, float64 value)        sets every element of dst (a float or integer tensor)
//   saxpy(y, x, float32 a)          y = a * x + y over float32 vectors of one length
//   matmul(C, A, B)                 naive float32 C[m, n] = A[m, k] × B[k, n]
#pragma once

#include "core/modules/module.h"

namespace kprof::core {

inline constexpr std::string_view kBuiltinModuleName = "builtin";

// The builtin module; lives as long as the process.
const Module& BuiltinModule();

}  // namespace kprof::core

/* Candidates for checked measurements: honest kernels and kernels that cut corners the ways a
 * kernel search finds (nothing done, half done, the wrong sum, an input written, inputs and
 * outputs zeroed, one NaN, a constant error), with references beside them.
 *   add_*(c, a, b): c = a + b over float32 vectors.
 *   copy_*(dst, src): dst = src over any element type (builtin:copy is their reference).
 *   offset_*(dst, src, eps): dst = src + eps (float types), or dst = src (offset_ref). */
#include <kprof/module_abi.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "add_args.h"

KPROF_EXPORT int32_t add_ref(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  return 0;
}

/* The same sum, in reverse order: honest, and not the reference's code. */
KPROF_EXPORT int32_t add_honest(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  for (int64_t i = n - 1; i >= 0; --i) c[i] = b[i] + a[i];
  return 0;
}

KPROF_EXPORT int32_t add_nothing(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  (void)a;
  (void)b;
  (void)c;
  return 0;
}

KPROF_EXPORT int32_t add_half(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  for (int64_t i = 0; i < n / 2; ++i) c[i] = a[i] + b[i];
  return 0;
}

KPROF_EXPORT int32_t add_minus(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] - b[i];
  return 0;
}

/* Right, but uses `a` as scratch space and leaves it changed. */
KPROF_EXPORT int32_t add_writes_input(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  for (int64_t i = 0; i < n; ++i) {
    a[i] = a[i] + b[i];
    c[i] = a[i];
  }
  return 0;
}

KPROF_EXPORT int32_t add_zeroes_all(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  memset(a, 0, (size_t)n * sizeof(float));
  memset(b, 0, (size_t)n * sizeof(float));
  memset(c, 0, (size_t)n * sizeof(float));
  return 0;
}

KPROF_EXPORT int32_t add_one_nan(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  if (n > 0) c[n / 3] = NAN;
  return 0;
}

/* Off by 1e-3 everywhere: within a loose tolerance, outside a tight one. */
KPROF_EXPORT int32_t add_off(DLTensor* args, int32_t num_args) {
  ADD_ARGS
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i] + 1e-3f;
  return 0;
}

/* Fails as a reference would: a non-zero return. */
KPROF_EXPORT int32_t add_fails(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 7;
}

/* Changes nothing: a reference with no outputs. */
KPROF_EXPORT int32_t add_idle(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return 0;
}

static int64_t Bytes(const DLTensor* t) {
  return kprof_num_elements(t) * ((t->dtype.bits * t->dtype.lanes + 7) / 8);
}

KPROF_EXPORT int32_t copy_honest(DLTensor* args, int32_t num_args) {
  if (num_args != 2 || Bytes(&args[0]) != Bytes(&args[1])) return 1;
  memcpy(args[0].data, args[1].data, (size_t)Bytes(&args[0]));
  return 0;
}

/* A copy whose last element is far from the source's, whatever its type. */
KPROF_EXPORT int32_t copy_wrong(DLTensor* args, int32_t num_args) {
  if (num_args != 2 || Bytes(&args[0]) != Bytes(&args[1])) return 1;
  const int64_t n = kprof_num_elements(&args[0]);
  memcpy(args[0].data, args[1].data, (size_t)Bytes(&args[0]));
  if (n == 0) return 0;
  unsigned char* last = (unsigned char*)args[0].data + (n - 1) * (args[0].dtype.bits / 8);
  const DLDataType t = args[0].dtype;
  if (t.code == kDLFloat && t.bits == 32) {
    *(float*)last = 1e30f;
  } else if (t.code == kDLFloat && t.bits == 64) {
    *(double*)last = 1e300;
  } else if (t.bits == 16 && (t.code == kDLFloat || t.code == kDLBfloat)) {
    const uint16_t big = t.code == kDLFloat ? 0x7BFF /* 65504 */ : 0x7F7F; /* 3.4e38 */
    memcpy(last, &big, 2);
  } else if (t.bits == 8 && t.code == 6 /* bool */) {
    *last = (unsigned char)(*last ^ 1);
  } else {
    last[0] = (unsigned char)(last[0] + 1); /* integers: the low byte, little-endian */
  }
  return 0;
}

static int32_t Offset(DLTensor* args, int32_t num_args, int apply) {
  if (num_args != 3 || Bytes(&args[0]) != Bytes(&args[1])) return 1;
  const double eps = apply ? *(const double*)args[2].data : 0.0;
  const int64_t n = kprof_num_elements(&args[0]);
  const DLDataType t = args[0].dtype;
  if (t.code == kDLFloat && t.bits == 32) {
    const float* s = (const float*)args[1].data;
    float* d = (float*)args[0].data;
    for (int64_t i = 0; i < n; ++i) d[i] = (float)(s[i] + eps);
  } else if (t.code == kDLFloat && t.bits == 64) {
    const double* s = (const double*)args[1].data;
    double* d = (double*)args[0].data;
    for (int64_t i = 0; i < n; ++i) d[i] = s[i] + eps;
  } else {
    return 3;
  }
  return 0;
}

KPROF_EXPORT int32_t offset_ref(DLTensor* args, int32_t num_args) {
  return Offset(args, num_args, 0);
}

KPROF_EXPORT int32_t offset_by(DLTensor* args, int32_t num_args) {
  return Offset(args, num_args, 1);
}

/* A kernel of known cost and known answer: spins `us` microseconds (args[1], float64), then
 * writes out[i] = i (args[0], float32). */
KPROF_EXPORT int32_t spin_then_fill(DLTensor* args, int32_t num_args) {
  if (num_args != 2) return 1;
  const double us = *(const double*)args[1].data;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((double)(now.tv_sec - start.tv_sec) * 1e6 + (double)(now.tv_nsec - start.tv_nsec) / 1e3 <
           us);
  float* out = (float*)args[0].data;
  const int64_t n = kprof_num_elements(&args[0]);
  for (int64_t i = 0; i < n; ++i) out[i] = (float)i;
  return 0;
}

/* A reference that never returns. */
KPROF_EXPORT int32_t add_hangs(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  for (;;) {
  }
}

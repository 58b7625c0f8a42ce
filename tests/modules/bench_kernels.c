/* The accuracy benchmark's kernels as a module: the same source as the builtins, so that the
 * benchmark's in-process side and kprofd's worker run one shared object, mapped at a page
 * boundary in both, its loops at the same offsets within their cache lines. */
#include <kprof/module_abi.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* spin_us(float64 us): busy-waits that long. */
KPROF_EXPORT int32_t spin_us(DLTensor* args, int32_t n) {
  if (n != 1 || args[0].ndim != 0) return 1;
  const double until = now_us() + *(const double*)args[0].data;
  while (now_us() < until) {
  }
  return 0;
}

/* copy(dst, src): memcpy of equal sizes. */
KPROF_EXPORT int32_t copy(DLTensor* args, int32_t n) {
  if (n != 2) return 1;
  const int64_t bytes = kprof_num_elements(&args[0]) * (args[0].dtype.bits / 8);
  if (bytes != kprof_num_elements(&args[1]) * (args[1].dtype.bits / 8)) return 1;
  memcpy(args[0].data, args[1].data, (size_t)bytes);
  return 0;
}

/* matmul(float32 C[m, n], A[m, k], B[k, n]): C = A × B, row by row. */
KPROF_EXPORT int32_t matmul(DLTensor* args, int32_t n) {
  if (n != 3 || args[0].ndim != 2 || args[1].ndim != 2 || args[2].ndim != 2) return 1;
  const int64_t m = args[1].shape[0], k = args[1].shape[1], cols = args[2].shape[1];
  if (args[0].shape[0] != m || args[0].shape[1] != cols || args[2].shape[0] != k) return 1;
  float* restrict c = (float*)args[0].data;
  const float* restrict a = (const float*)args[1].data;
  const float* restrict b = (const float*)args[2].data;
  for (int64_t i = 0; i < m * cols; ++i) c[i] = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const float aip = a[i * k + p];
      for (int64_t j = 0; j < cols; ++j) c[i * cols + j] += aip * b[p * cols + j];
    }
  }
  return 0;
}

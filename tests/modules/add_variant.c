/* add(c, a, b): c = a + b over float32 vectors — one entry point, as a tuner's candidates
 * share, built once per way of computing it: ADD_HONEST, and the corners a kernel search cuts
 * (ADD_NOTHING, ADD_HALF, ADD_MINUS, ADD_WRITES_INPUT, ADD_NAN). */
#include <kprof/module_abi.h>
#include <math.h>

KPROF_EXPORT int32_t add(DLTensor* args, int32_t num_args) {
  if (num_args != 3) return 1;
  float* c = (float*)args[0].data;
  float* a = (float*)args[1].data;
  const float* b = (const float*)args[2].data;
  const int64_t n = kprof_num_elements(&args[0]);
  if (kprof_num_elements(&args[1]) != n || kprof_num_elements(&args[2]) != n) return 2;
#if defined(ADD_NOTHING)
  (void)a;
  (void)b;
  (void)c;
#elif defined(ADD_HALF)
  for (int64_t i = 0; i < n / 2; ++i) c[i] = a[i] + b[i];
#elif defined(ADD_MINUS)
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] - b[i];
#elif defined(ADD_WRITES_INPUT)
  for (int64_t i = 0; i < n; ++i) {
    a[i] += b[i];
    c[i] = a[i];
  }
#else
  for (int64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
#if defined(ADD_NAN)
  if (n > 0) c[n - 1] = NAN;
#endif
#endif
  return 0;
}

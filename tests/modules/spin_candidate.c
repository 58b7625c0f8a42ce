/* One autotuning candidate: every candidate exports the same entry point, `gemm`, as a tuner's
 * do, and differs only in its cost. Built many times over with SPIN_US (how long gemm spins,
 * in microseconds of wall time) and CANDIDATE (what `candidate` returns). With
 * CANDIDATE_USES_LIBM the deadline goes through libm, so the module needs libm.so.6 loaded for
 * it; with a nodelete link flag it is one the loader never unloads. */
#include <kprof/module_abi.h>
#include <time.h>
#ifdef CANDIDATE_USES_LIBM
#include <math.h>
#endif

#ifndef SPIN_US
#error "SPIN_US: the candidate's cost in microseconds"
#endif
#ifndef CANDIDATE
#define CANDIDATE SPIN_US
#endif
#ifndef ENTRY_POINT
#define ENTRY_POINT gemm
#endif

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* Spins SPIN_US microseconds; takes any arguments. */
KPROF_EXPORT int32_t ENTRY_POINT(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
#ifdef CANDIDATE_USES_LIBM
  volatile double cost = (double)SPIN_US * SPIN_US * SPIN_US;
  const double end = now_us() + cbrt(cost);
#else
  const double end = now_us() + (double)SPIN_US;
#endif
  while (now_us() < end) {
  }
  return 0;
}

/* Which candidate this is, as its return code: a test that calls it knows whose code ran. */
KPROF_EXPORT int32_t candidate(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
  return CANDIDATE;
}

/* How many times this image's `calls` has been called: the image's own state. */
KPROF_EXPORT int32_t calls(DLTensor* args, int32_t num_args) {
  static int32_t count = 0;
  (void)args;
  (void)num_args;
  return ++count;
}

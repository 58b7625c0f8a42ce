/* One autotuning candidate: every candidate exports the same entry point, `gemm`, as a tuner's
 * do, and differs only in its cost. Built many times over with COST_US (how long gemm takes,
 * in microseconds of wall time) and CANDIDATE (what `candidate` returns). With
 * CANDIDATE_USES_LIBM the deadline goes through libm, so the module needs libm.so.6 loaded for
 * it; with a nodelete link flag it is one the loader never unloads.
 *
 * gemm sleeps to an absolute deadline rather than spinning: on a busy host a spin shares its
 * CPU and takes up to twice its cost, while a sleep ends at its deadline plus a wake-up, so
 * every repeat measures close to the candidate's own cost. */
#include <errno.h>
#include <kprof/module_abi.h>
#include <time.h>
#ifdef CANDIDATE_USES_LIBM
#include <math.h>
#endif

#ifndef COST_US
#error "COST_US: the candidate's cost in microseconds"
#endif
#ifndef CANDIDATE
#define CANDIDATE COST_US
#endif
#ifndef ENTRY_POINT
#define ENTRY_POINT gemm
#endif

/* Takes COST_US microseconds of wall time; takes any arguments. */
KPROF_EXPORT int32_t ENTRY_POINT(DLTensor* args, int32_t num_args) {
  (void)args;
  (void)num_args;
#ifdef CANDIDATE_USES_LIBM
  volatile double cube = (double)COST_US * COST_US * COST_US;
  const long long cost_ns = (long long)(cbrt(cube) * 1000.0 + 0.5);
#else
  const long long cost_ns = (long long)COST_US * 1000;
#endif
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += (time_t)(cost_ns / 1000000000LL);
  deadline.tv_nsec += (long)(cost_ns % 1000000000LL);
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
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

/* spin_jitter(max_us): spins for a random time, uniform in [0, max_us] microseconds — a
 * function whose repeats never agree, for the convergence tests. */
#include <kprof/module_abi.h>
#include <time.h>

static uint64_t state = 0x9e3779b97f4a7c15u;

static uint64_t next_random(void) { /* xorshift64 */
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

KPROF_EXPORT int32_t spin_jitter(DLTensor* args, int32_t num_args) {
  if (num_args != 1 || args[0].ndim != 0 || args[0].dtype.code != kDLFloat ||
      args[0].dtype.bits != 64) {
    return 1;
  }
  const double max_us = *(const double*)args[0].data;
  const double duration = max_us * (double)(next_random() >> 11) / 9007199254740992.0;
  const double end = now_us() + duration;
  while (now_us() < end) {
  }
  return 0;
}

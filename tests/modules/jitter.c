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

/* spin_stall(us, every): spins for us microseconds, and for 100 times as long on every
 * every-th call (the every-th, the 2·every-th, ...) — a repeat that stalls now and then, for the
 * pictures that draw far-out repeats apart. */
KPROF_EXPORT int32_t spin_stall(DLTensor* args, int32_t num_args) {
  static int64_t calls = 0;
  if (num_args != 2 || args[0].ndim != 0 || args[0].dtype.code != kDLFloat ||
      args[0].dtype.bits != 64 || args[1].ndim != 0 || args[1].dtype.code != kDLInt ||
      args[1].dtype.bits != 64) {
    return 1;
  }
  const int64_t every = *(const int64_t*)args[1].data;
  const double us = *(const double*)args[0].data * (every > 0 && ++calls % every == 0 ? 100 : 1);
  const double end = now_us() + us;
  while (now_us() < end) {
  }
  return 0;
}

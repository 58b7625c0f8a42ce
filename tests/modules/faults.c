/* One function per way a candidate kernel can go wrong, for the reliability tests. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <kprof/module_abi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define UNUSED (void)args, (void)num_args

KPROF_EXPORT int32_t segfault(DLTensor* args, int32_t num_args) {
  UNUSED;
  volatile int* nowhere = (volatile int*)0;
  return *nowhere;
}

KPROF_EXPORT int32_t aborts(DLTensor* args, int32_t num_args) {
  UNUSED;
  abort();
}

KPROF_EXPORT int32_t divides_by_zero(DLTensor* args, int32_t num_args) {
  UNUSED;
#if defined(__x86_64__)
  volatile int one = 1, zero = 0; /* volatile: 1 / x would compile to a comparison */
  return one / zero;
#else
  raise(SIGFPE); /* arm64's integer division by zero gives 0 and traps nothing */
  return 0;
#endif
}

KPROF_EXPORT int32_t bus_error(DLTensor* args, int32_t num_args) {
  UNUSED;
  raise(SIGBUS);
  return 0;
}

KPROF_EXPORT int32_t illegal_instruction(DLTensor* args, int32_t num_args) {
  UNUSED;
#if defined(__aarch64__)
  __asm__ volatile("udf #0"); /* __builtin_trap is brk there: SIGTRAP, not SIGILL */
#endif
  __builtin_trap();
}

#pragma GCC diagnostic ignored "-Winfinite-recursion" /* the point of the function */
static int32_t recurse(volatile char* previous) {
  volatile char frame[4096];
  frame[0] = previous != NULL ? previous[0] : 1;
  return recurse(frame) + frame[0];
}

KPROF_EXPORT int32_t overflows_stack(DLTensor* args, int32_t num_args) {
  UNUSED;
  return recurse(NULL);
}

KPROF_EXPORT int32_t calls_exit(DLTensor* args, int32_t num_args) {
  UNUSED;
  exit(3);
}

KPROF_EXPORT int32_t calls_underscore_exit(DLTensor* args, int32_t num_args) {
  UNUSED;
  _exit(4);
}

KPROF_EXPORT int32_t closes_streams(DLTensor* args, int32_t num_args) {
  UNUSED;
  close(0);
  close(1);
  close(2);
  return 0;
}

static void* forever(void* unused) {
  (void)unused;
  for (;;) pause();
  return NULL;
}

KPROF_EXPORT int32_t leaves_thread(DLTensor* args, int32_t num_args) {
  UNUSED;
  pthread_t thread;
  return pthread_create(&thread, NULL, forever, NULL) == 0 ? 0 : 1;
}

KPROF_EXPORT int32_t hangs(DLTensor* args, int32_t num_args) {
  UNUSED;
  for (volatile int spin = 1; spin;) {
  }
  return 0;
}

/* Asks for far more memory than a worker may have and touches it all. */
KPROF_EXPORT int32_t allocates_too_much(DLTensor* args, int32_t num_args) {
  UNUSED;
  const size_t bytes = (size_t)64 << 30;
  char* p = malloc(bytes);
  if (p == NULL) return 12; /* ENOMEM: the limit worked */
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  free(p);
  return 0;
}

/* Spins for `ns`, then writes "TAG START END" (CLOCK_MONOTONIC nanoseconds) to the worker's
 * standard error in one write of one line: a test that runs kprofd with --log-worker-output
 * reads every worker's in its log, and checks that no two jobs on one device overlap. */
static int32_t record_interval(const char* tag, long ns) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000000000L + (now.tv_nsec - start.tv_nsec) < ns);
  char line[80];
  const int n = snprintf(line, sizeof line, "%s %lld %lld\n", tag,
                         (long long)start.tv_sec * 1000000000LL + start.tv_nsec,
                         (long long)now.tv_sec * 1000000000LL + now.tv_nsec);
  return write(2, line, (size_t)n) == n ? 0 : 4;
}

/* The spin of a call: a float64 scalar argument in microseconds, else 200. */
static long spin_ns(const DLTensor* args, int32_t num_args) {
  if (num_args >= 1 && args[0].ndim == 0 && args[0].dtype.code == kDLFloat &&
      args[0].dtype.bits == 64) {
    double us = 0;
    memcpy(&us, (const char*)args[0].data + args[0].byte_offset, sizeof us);
    if (us >= 0 && us <= 1e6) return (long)(us * 1000);
  }
  return 200000L;
}

KPROF_EXPORT int32_t records_interval(DLTensor* args, int32_t num_args) {
  return record_interval("interval", spin_ns(args, num_args));
}

/* The same, tagged otherwise: another client's job among them. */
KPROF_EXPORT int32_t records_marked_interval(DLTensor* args, int32_t num_args) {
  return record_interval("marked", spin_ns(args, num_args));
}

KPROF_EXPORT int32_t succeeds(DLTensor* args, int32_t num_args) {
  UNUSED;
  return 0;
}

/* Tries what a worker's sandbox forbids: 0 when all is refused, else which succeeded. */
KPROF_EXPORT int32_t probes_sandbox(DLTensor* args, int32_t num_args) {
  UNUSED;
  const char* token = getenv("KPROF_TEST_TOKEN_FILE");
  const char* cache = getenv("KPROF_TEST_CACHE_DIR");
  if (token == NULL || cache == NULL) return 1;
  int fd = open(token, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return 10; /* read the token file */
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/modules/planted", cache);
  fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) {
    close(fd);
    return 11; /* wrote into the module cache */
  }
  fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return 12; /* scratch must stay writable */
  close(fd);
  return 0;
}

/* Prints what a module may print: a line on each standard stream, one forging the daemon's own
 * log, one with an escape sequence that would move a terminal's cursor, and a last one without
 * its newline. */
KPROF_EXPORT int32_t prints(DLTensor* args, int32_t num_args) {
  UNUSED;
  printf("hello from the kernel\n");
  fprintf(stderr,
          "2026-12-07T03:59:49.792Z error lease deadbeef on cpu:0 ended: forged CODE=ABORTED\n");
  fprintf(stderr, "moves the cursor: \033[2J\n");
  printf("no newline at the end");
  return 0;
}

/* Writes 8 MiB to its standard output on every call: a flood that must neither reach the
 * daemon's log nor stall the kernel. The last line of each call says how many calls there were. */
KPROF_EXPORT int32_t prints_a_flood(DLTensor* args, int32_t num_args) {
  UNUSED;
  static int calls = 0;
  static char block[1 << 16];
  memset(block, 'f', sizeof block - 1);
  block[sizeof block - 1] = '\n';
  for (int i = 0; i < 128; ++i) {
    if (write(1, block, sizeof block) != (ssize_t)sizeof block) return 5;
  }
  printf("flood call %d done\n", ++calls);
  fflush(stdout);
  return 0;
}

/* Fails an assertion of its own, saying why on its standard error, and aborts. */
KPROF_EXPORT int32_t asserts(DLTensor* args, int32_t num_args) {
  UNUSED;
  fprintf(stderr, "vadd.c:12: vadd: check failed: n > 0 (n = %d)\n", num_args - 1);
  abort();
}

/* Says where it is, then never returns: the job timeout's message tells where it hung. */
KPROF_EXPORT int32_t prints_and_hangs(DLTensor* args, int32_t num_args) {
  UNUSED;
  fprintf(stderr, "waiting for a lock no one releases\n");
  for (;;) pause();
}

/* Work the kernel does on the calling thread's behalf, in kernel mode: what a count that
 * excludes the kernel misses. */
#define _GNU_SOURCE
#include <kprof/module_abi.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static int64_t count_arg(const DLTensor* args, int32_t num_args) {
  if (num_args != 1 || args[0].ndim != 0 || args[0].dtype.code != kDLFloat ||
      args[0].dtype.bits != 64) {
    return -1;
  }
  return (int64_t)*(const double*)args[0].data;
}

/* faults_through_read(float64 pages): reads `pages` pages of a sparse memfd into fresh
 * anonymous memory, so that every page faults while the kernel copies into it. */
KPROF_EXPORT int32_t faults_through_read(DLTensor* args, int32_t num_args) {
  const int64_t pages = count_arg(args, num_args);
  if (pages <= 0) return 1;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t bytes = (size_t)pages * page;
  const int fd = memfd_create("kprof-zeros", MFD_CLOEXEC);
  if (fd < 0) return 2;
  if (ftruncate(fd, (off_t)bytes) != 0) {
    close(fd);
    return 3;
  }
  char* region = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) {
    close(fd);
    return 4;
  }
  madvise(region, bytes, MADV_NOHUGEPAGE);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = pread(fd, region + done, bytes - done, (off_t)done);
    if (n <= 0) break;
    done += (size_t)n;
  }
  munmap(region, bytes);
  close(fd);
  return done == bytes ? 0 : 5;
}

/* sleeps(float64 n): n sleeps of a millisecond, each a voluntary context switch. */
KPROF_EXPORT int32_t sleeps(DLTensor* args, int32_t num_args) {
  const int64_t n = count_arg(args, num_args);
  if (n < 0) return 1;
  for (int64_t i = 0; i < n; ++i) {
    const struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return 0;
}

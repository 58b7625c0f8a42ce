/* Attacks through the file system: the module cache, the scratch directories of this worker
 * and of others, shared temporary directories, device nodes, and memory kept in tmpfs. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <kprof/module_abi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "attacks.h"

/* The module cache, found the way an attacker would: the daemon's --cache-dir argument, in its
 * command line. Every file in it is chmod'ed and truncated; the first refusal's errno is the
 * answer. */
static int cache_dir(char* out, size_t size) {
  char cmdline[8192];
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)getppid());
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return -1;
  const ssize_t n = read(fd, cmdline, sizeof cmdline - 1);
  close(fd);
  if (n <= 0) return -1;
  cmdline[n] = 0;
  for (const char* arg = cmdline; arg < cmdline + n; arg += strlen(arg) + 1) {
    if (strcmp(arg, "--cache-dir") == 0 && arg + strlen(arg) + 1 < cmdline + n) {
      snprintf(out, size, "%s", arg + strlen(arg) + 1);
      return 0;
    }
  }
  return -1;
}

/* The first refusal's errno over the regular files of DIR, 0 as soon as one gives way, -1
 * when there are none. */
static int32_t on_files(const char* dir_path, int (*attack)(const char*)) {
  DIR* dir = opendir(dir_path);
  if (dir == NULL) return -1;
  int32_t answer = -1;
  char path[8192];
  for (struct dirent* entry; (entry = readdir(dir)) != NULL;) {
    if (entry->d_type != DT_REG) continue;
    snprintf(path, sizeof path, "%s/%s", dir_path, entry->d_name);
    const int refused = attack(path) == -1 ? errno : 0;
    if (refused == 0) {
      answer = 0;
      break;
    }
    if (answer == -1) answer = refused;
  }
  closedir(dir);
  return answer;
}

/* The cache's lock (its path is known) and the modules in it (if the directory can be listed:
 * it cannot, for a worker sees only its client's view of the cache). */
static int32_t on_cache_files(int (*attack)(const char*)) {
  char dir_path[4096];
  char path[4200];
  if (cache_dir(dir_path, sizeof dir_path) != 0) return -1;
  snprintf(path, sizeof path, "%s/lock", dir_path);
  const int32_t lock = attack(path) == -1 ? errno : 0;
  if (lock == 0) return 0;
  snprintf(path, sizeof path, "%s/modules", dir_path);
  const int32_t inside = on_files(path, attack);
  return inside == 0 ? 0 : lock;
}

/* Another client's modules, names and holders: the cache directory itself. */
KPROF_EXPORT int32_t reads_the_cache(DLTensor* args, int32_t num_args) {
  UNUSED;
  char dir_path[4096];
  char path[4200];
  if (cache_dir(dir_path, sizeof dir_path) != 0) return -1;
  static const char* const kUnder[] = {".", "modules"};
  int refused = 0;
  for (size_t i = 0; i < sizeof kUnder / sizeof kUnder[0]; ++i) {
    snprintf(path, sizeof path, "%s/%s", dir_path, kUnder[i]);
    DIR* dir = opendir(path);
    if (dir != NULL) {
      closedir(dir);
      return 0;
    }
    refused = errno;
  }
  snprintf(path, sizeof path, "%s/lock", dir_path);
  const int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    close(fd);
    return 0;
  }
  return refused;
}

static int make_writable(const char* path) { return chmod(path, 0666); }
static int empty(const char* path) { return truncate(path, 0); }
static int empty_through_open(const char* path) {
  const int fd = open(path, O_WRONLY | O_TRUNC);
  if (fd >= 0) close(fd);
  return fd >= 0 ? 0 : -1;
}

KPROF_EXPORT int32_t chmods_the_cache(DLTensor* args, int32_t num_args) {
  UNUSED;
  return on_cache_files(make_writable);
}

KPROF_EXPORT int32_t truncates_the_cache(DLTensor* args, int32_t num_args) {
  UNUSED;
  const int32_t truncated = on_cache_files(empty);
  return truncated == 0 ? 0 : on_cache_files(empty_through_open);
}

/* Shared scratch space: what one client's function writes to /tmp, /var/tmp or /dev/shm,
 * another client's could read. 0 when a file could be made in any of them. */
KPROF_EXPORT int32_t writes_shared_tmp(DLTensor* args, int32_t num_args) {
  UNUSED;
  static const char* const kShared[] = {"/tmp/kprof-attack", "/var/tmp/kprof-attack",
                                        "/dev/shm/kprof-attack"};
  int refused = 0;
  for (size_t i = 0; i < sizeof kShared / sizeof kShared[0]; ++i) {
    const int fd = open(kShared[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      close(fd);
      unlink(kShared[i]);
      return 0;
    }
    if (refused == 0) refused = errno;
  }
  return refused;
}

/* Device nodes beyond the null, zero and random ones and the GPU's: the kernel log (writable
 * by root) and a new node in /dev. */
KPROF_EXPORT int32_t opens_a_device(DLTensor* args, int32_t num_args) {
  UNUSED;
  int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return 0;
  }
  const int refused = errno;
  fd = open("/dev/kprof-attack", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) {
    close(fd);
    unlink("/dev/kprof-attack");
    return 0;
  }
  return refused;
}

/* The scratch directories of other clients' workers lie beside this worker's own ($TMPDIR). */
KPROF_EXPORT int32_t reads_other_scratch(DLTensor* args, int32_t num_args) {
  UNUSED;
  const char* tmpdir = getenv("TMPDIR");
  if (tmpdir == NULL) return -1;
  char parent[4096];
  snprintf(parent, sizeof parent, "%s", tmpdir);
  char* slash = strrchr(parent, '/');
  if (slash == NULL) return -1;
  *slash = 0;
  DIR* dir = opendir(parent);
  if (dir == NULL) return errno;
  closedir(dir);
  return 0;
}

/* $TMPDIR/NAME into OUT: 0, or -1 without a TMPDIR. */
static int scratch_path(char* out, size_t size, const char* name) {
  const char* tmpdir = getenv("TMPDIR");
  if (tmpdir == NULL) return -1;
  snprintf(out, size, "%s/%s", tmpdir, name);
  return 0;
}

/* A function's own scratch: $TMPDIR is writable, and what it leaves there ends its worker. */
KPROF_EXPORT int32_t writes_its_scratch(DLTensor* args, int32_t num_args) {
  UNUSED;
  char path[4096];
  if (scratch_path(path, sizeof path, "sub") != 0) return 1;
  if (mkdir(path, 0700) != 0) return 2;
  scratch_path(path, sizeof path, "sub/file");
  const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return 3;
  char byte = 7;
  const int written = write(fd, &byte, 1) == 1 && pread(fd, &byte, 1, 0) == 1 && byte == 7;
  close(fd);
  if (!written) return 4;
  if (unlink(path) != 0) return 5;
  scratch_path(path, sizeof path, "sub");
  if (rmdir(path) != 0) return 6;
  return 0;
}

KPROF_EXPORT int32_t leaves_a_file_in_its_scratch(DLTensor* args, int32_t num_args) {
  UNUSED;
  char path[4096];
  if (scratch_path(path, sizeof path, "left-behind") != 0) return 1;
  const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

/* Memory RLIMIT_DATA does not count: a shared anonymous mapping, and files in the tmpfs
 * scratch, 256 MiB each, every page touched. Both are bounded by the worker's memory cgroup. */
KPROF_EXPORT int32_t maps_shared_memory(DLTensor* args, int32_t num_args) {
  UNUSED;
  const size_t bytes = (size_t)256 << 20;
  char* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return errno;
  for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
  munmap(p, bytes);
  return 0;
}

KPROF_EXPORT int32_t fills_its_scratch(DLTensor* args, int32_t num_args) {
  UNUSED;
  char path[4096];
  if (scratch_path(path, sizeof path, "big") != 0) return 1;
  const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  static char block[1 << 20];
  memset(block, 1, sizeof block);
  int error = 0;
  for (int i = 0; i < 256 && error == 0; ++i) {
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block) error = errno != 0 ? errno : -1;
  }
  close(fd);
  unlink(path);
  return error;
}

/* A directory its owner may write and enter but not list (mode 0300), with a file in it, left
 * in the scratch: the front, which may not list it either unless it is root, removes it all the
 * same. */
KPROF_EXPORT int32_t leaves_a_locked_directory(DLTensor* args, int32_t num_args) {
  UNUSED;
  char path[4096];
  if (scratch_path(path, sizeof path, "locked") != 0) return 1;
  if (mkdir(path, 0300) != 0) return errno;
  char inner[4200];
  snprintf(inner, sizeof inner, "%s/inner", path);
  const int fd = open(inner, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  close(fd);
  return 0;
}

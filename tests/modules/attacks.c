/* Hostile functions, for the isolation tests: each tries one way to reach beyond its own job —
 * another process, the daemon, a later job, the module cache, the network. A function returns
 * the errno of the call the worker's sandbox refused (EPERM is 1, EACCES 13), or 0 when the
 * attack went through, which the tests count as a failure of the sandbox. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <kprof/module_abi.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UNUSED (void)args, (void)num_args
#define REFUSED(call) ((call) == -1 ? errno : 0)

/* The job socket proxy of the forging attack: a grandchild in a session of its own keeps the
 * worker's job socket and reads what the daemon sends to later jobs. */
KPROF_EXPORT int32_t forks_a_proxy(DLTensor* args, int32_t num_args) {
  UNUSED;
  const pid_t child = fork();
  if (child == -1) return errno;
  if (child == 0) {
    setsid();
    if (fork() == 0) {
      char buffer[4096];
      while (read(3, buffer, sizeof buffer) > 0) {
      }
      _exit(0);
    }
    _exit(0);
  }
  waitpid(child, NULL, 0);
  return 0;
}

/* A process started some other way than fork: clone without CLONE_THREAD, and exec. */
KPROF_EXPORT int32_t clones_a_process(DLTensor* args, int32_t num_args) {
  UNUSED;
  const long child = syscall(SYS_clone, (unsigned long)SIGCHLD, 0, 0, 0, 0);
  if (child == -1) return errno;
  if (child == 0) {
    pause();
    _exit(0);
  }
  return 0;
}

KPROF_EXPORT int32_t execs(DLTensor* args, int32_t num_args) {
  UNUSED;
  char* const argv[] = {"/bin/true", NULL};
  char* const envp[] = {NULL};
  return REFUSED(execve("/bin/true", argv, envp));
}

/* The daemon's front is the worker's parent. */
KPROF_EXPORT int32_t stops_the_daemon(DLTensor* args, int32_t num_args) {
  UNUSED;
  return REFUSED(kill(getppid(), SIGSTOP));
}

KPROF_EXPORT int32_t terminates_the_daemon(DLTensor* args, int32_t num_args) {
  UNUSED;
  return REFUSED(kill(getppid(), SIGTERM));
}

KPROF_EXPORT int32_t signals_its_group(DLTensor* args, int32_t num_args) {
  UNUSED;
  return REFUSED(kill(0, SIGTERM));
}

KPROF_EXPORT int32_t queues_a_signal_to_the_daemon(DLTensor* args, int32_t num_args) {
  UNUSED;
  union sigval value = {0};
  return REFUSED(sigqueue(getppid(), SIGTERM, value));
}

KPROF_EXPORT int32_t limits_the_daemon(DLTensor* args, int32_t num_args) {
  UNUSED;
  const struct rlimit few = {24, 24};
  return REFUSED(prlimit(getppid(), RLIMIT_NOFILE, &few, NULL));
}

KPROF_EXPORT int32_t renices_the_daemon(DLTensor* args, int32_t num_args) {
  UNUSED;
  return REFUSED(setpriority(PRIO_PROCESS, (id_t)getppid(), 19));
}

KPROF_EXPORT int32_t traces_the_daemon(DLTensor* args, int32_t num_args) {
  UNUSED;
  return REFUSED(ptrace(PTRACE_ATTACH, getppid(), 0, 0));
}

/* What would change the next job's worker. */
KPROF_EXPORT int32_t sets_an_alarm(DLTensor* args, int32_t num_args) {
  UNUSED;
  const struct itimerval later = {{0, 0}, {2, 0}};
  const int refused = REFUSED(setitimer(ITIMER_REAL, &later, NULL));
  if (refused == 0) return 0;
  return REFUSED(syscall(SYS_alarm, 2));
}

KPROF_EXPORT int32_t creates_a_timer(DLTensor* args, int32_t num_args) {
  UNUSED;
  timer_t timer;
  return REFUSED(syscall(SYS_timer_create, CLOCK_MONOTONIC, NULL, &timer));
}

KPROF_EXPORT int32_t lowers_a_limit(DLTensor* args, int32_t num_args) {
  UNUSED;
  const struct rlimit small = {1 << 20, 1 << 20};
  return REFUSED(setrlimit(RLIMIT_AS, &small));
}

KPROF_EXPORT int32_t ignores_sigterm(DLTensor* args, int32_t num_args) {
  UNUSED;
  struct sigaction ignore;
  memset(&ignore, 0, sizeof ignore);
  ignore.sa_handler = SIG_IGN;
  return REFUSED(sigaction(SIGTERM, &ignore, NULL));
}

KPROF_EXPORT int32_t changes_directory(DLTensor* args, int32_t num_args) {
  UNUSED;
  return REFUSED(chdir("/"));
}

KPROF_EXPORT int32_t changes_umask(DLTensor* args, int32_t num_args) {
  UNUSED;
  return REFUSED(syscall(SYS_umask, 0777));
}

KPROF_EXPORT int32_t unpins_itself(DLTensor* args, int32_t num_args) {
  UNUSED;
  cpu_set_t all;
  CPU_ZERO(&all);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &all);
  return REFUSED(sched_setaffinity(0, sizeof all, &all));
}

KPROF_EXPORT int32_t starts_a_session(DLTensor* args, int32_t num_args) {
  UNUSED;
  return REFUSED(setsid());
}

KPROF_EXPORT int32_t opens_a_tcp_socket(DLTensor* args, int32_t num_args) {
  UNUSED;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd == -1) return errno;
  close(fd);
  return 0;
}

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

/* The job socket replaced by one end of a socketpair: whatever the worker writes next would go
 * to whoever holds the other end. */
KPROF_EXPORT int32_t replaces_the_job_socket(DLTensor* args, int32_t num_args) {
  UNUSED;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return errno;
  dup2(pair[0], 3);
  close(pair[0]);
  return 0;
}

/* State one job leaves in its process that no end-of-job check looks at: a later job of
 * another client must never see it (it runs in a worker of its own). */
KPROF_EXPORT int32_t plants_state(DLTensor* args, int32_t num_args) {
  UNUSED;
  return setenv("KPROF_PLANTED_BY_ANOTHER_JOB", "1", 1) == 0 ? 0 : errno;
}

KPROF_EXPORT int32_t sees_planted_state(DLTensor* args, int32_t num_args) {
  UNUSED;
  return getenv("KPROF_PLANTED_BY_ANOTHER_JOB") != NULL ? 42 : 0;
}

/* A signal by way of SIGIO: the daemon made the owner of a socket, which then signals it. */
KPROF_EXPORT int32_t signals_the_daemon_through_sigio(DLTensor* args, int32_t num_args) {
  UNUSED;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return errno;
  const int refused = REFUSED(fcntl(pair[0], F_SETOWN, getppid()));
  const int refused_sig = REFUSED(fcntl(pair[0], F_SETSIG, SIGKILL));
  close(pair[0]);
  close(pair[1]);
  return refused != 0 ? refused : refused_sig;
}

/* io_uring opens sockets and files without the calls the filter sees. */
KPROF_EXPORT int32_t sets_up_io_uring(DLTensor* args, int32_t num_args) {
  UNUSED;
  char params[120];
  memset(params, 0, sizeof params);
  const long fd = syscall(425 /* io_uring_setup */, 8, params);
  if (fd >= 0) close((int)fd);
  return fd >= 0 ? 0 : errno;
}

KPROF_EXPORT int32_t opens_a_vsock(DLTensor* args, int32_t num_args) {
  UNUSED;
  const int fd = socket(40 /* AF_VSOCK */, SOCK_STREAM, 0);
  if (fd == -1) return errno;
  close(fd);
  return 0;
}

/* What a root daemon's worker could do with its capabilities (CAP_DAC_OVERRIDE, CAP_SYS_ADMIN,
 * CAP_KILL...): none is left but CAP_PERFMON (bit 38). EPERM when they are gone. */
KPROF_EXPORT int32_t holds_capabilities(DLTensor* args, int32_t num_args) {
  UNUSED;
  FILE* status = fopen("/proc/self/status", "r");
  if (status == NULL) return -1;
  char line[256];
  unsigned long long effective = ~0ULL, permitted = ~0ULL, bounding = ~0ULL;
  while (fgets(line, sizeof line, status) != NULL) {
    sscanf(line, "CapEff: %llx", &effective);
    sscanf(line, "CapPrm: %llx", &permitted);
    sscanf(line, "CapBnd: %llx", &bounding);
  }
  fclose(status);
  const unsigned long long allowed = 1ULL << 38;
  const int root = geteuid() == 0;
  if ((effective & ~allowed) != 0 || (permitted & ~allowed) != 0) return 0;
  if (root && (bounding & ~allowed) != 0) return 0;
  return EPERM;
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

/* System V shared memory and POSIX message queues are the host's: another client's function
 * could attach the segment by its id, or open the queue by its name. */
KPROF_EXPORT int32_t uses_system_v_ipc(DLTensor* args, int32_t num_args) {
  UNUSED;
  const long id = syscall(SYS_shmget, 0 /* IPC_PRIVATE */, 4096, 01000 /* IPC_CREAT */ | 0600);
  if (id >= 0) {
    syscall(SYS_shmctl, id, 0 /* IPC_RMID */, NULL);
    return 0;
  }
  return errno;
}

KPROF_EXPORT int32_t opens_a_message_queue(DLTensor* args, int32_t num_args) {
  UNUSED;
  const long fd = syscall(SYS_mq_open, "kprof-attack", O_RDWR | O_CREAT, 0600, NULL);
  if (fd >= 0) {
    close((int)fd);
    syscall(SYS_mq_unlink, "kprof-attack");
    return 0;
  }
  return errno;
}

/* A Unix socket reaches whatever listens on a path: the service manager, a container
 * runtime. */
KPROF_EXPORT int32_t opens_a_unix_socket(DLTensor* args, int32_t num_args) {
  UNUSED;
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd == -1) return errno;
  close(fd);
  return 0;
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

/* A root daemon's worker is another user: uid 0 would read what only root may (/etc/shadow,
 * /root), Landlock or not. EPERM when the worker is not root. */
KPROF_EXPORT int32_t runs_as_root(DLTensor* args, int32_t num_args) {
  UNUSED;
  uid_t real, effective, saved;
  if (getresuid(&real, &effective, &saved) != 0) return -1;
  return real == 0 || effective == 0 || saved == 0 ? 0 : EPERM;
}

KPROF_EXPORT int32_t reads_a_root_only_file(DLTensor* args, int32_t num_args) {
  UNUSED;
  const int fd = open("/etc/shadow", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return 0;
  }
  return errno;
}

/* Memory RLIMIT_DATA does not count: a shared anonymous mapping, and files in the tmpfs
 * scratch, 256 MiB each, every page touched. Both are bounded by the worker's memory cgroup. */
#include <sys/mman.h>

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

/* A datagram socket pair: with sendto, either end reaches any datagram socket by its path. */
KPROF_EXPORT int32_t makes_a_datagram_pair(DLTensor* args, int32_t num_args) {
  UNUSED;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) != 0) return errno;
  close(pair[0]);
  close(pair[1]);
  return 0;
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

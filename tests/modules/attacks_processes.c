/* Attacks through processes, signals, timers, limits and privileges: on the daemon (the worker's
 * parent) and on the worker that runs the next job. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <kprof/module_abi.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attacks.h"

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
#ifdef SYS_alarm
  return REFUSED(syscall(SYS_alarm, 2));
#else
  return refused; /* arm64 has no alarm(2): its libc's alarm is setitimer */
#endif
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

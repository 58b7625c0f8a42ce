/* Attacks through sockets and IPC: the network, the job socket, Unix and vsock sockets,
 * io_uring, and the host's System V shared memory and POSIX message queues. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <kprof/module_abi.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "attacks.h"

KPROF_EXPORT int32_t opens_a_tcp_socket(DLTensor* args, int32_t num_args) {
  UNUSED;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd == -1) return errno;
  close(fd);
  return 0;
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

/* A datagram socket pair: with sendto, either end reaches any datagram socket by its path. */
KPROF_EXPORT int32_t makes_a_datagram_pair(DLTensor* args, int32_t num_args) {
  UNUSED;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, pair) != 0) return errno;
  close(pair[0]);
  close(pair[1]);
  return 0;
}

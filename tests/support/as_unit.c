/* as_unit SYSCALLS UID PROGRAM ARGS...: runs PROGRAM under the restrictions of kprofd's systemd
 * unit that bear on the workers' sandbox, applied by hand (this host has no systemd to run
 * the unit): its user (uid UID when started as root, like DynamicUser=; 0 keeps the caller's),
 * no capabilities (CapabilityBoundingSet=), no_new_privs (NoNewPrivileges=), and its system
 * call filter, given as SYSCALLS: a file of the syscall names the unit's SystemCallFilter= lines
 * allow, one per line (the test expands them with systemd-analyze); every other call fails
 * with EPERM (SystemCallErrorNumber=EPERM), for PROGRAM and everything it starts. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: as_unit SYSCALLS UID PROGRAM ARGS...\n");
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
  FILE* names = fopen(argv[1], "r");
  if (ctx == NULL || names == NULL) {
    fprintf(stderr, "as_unit: cannot read %s\n", argv[1]);
    return 1;
  }
  char name[128];
  int allowed = 0;
  while (fscanf(names, "%127s", name) == 1) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue; /* not a call of this architecture */
    if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) == 0) ++allowed;
  }
  fclose(names);
  const uid_t uid = (uid_t)strtoul(argv[2], NULL, 10);
  /* No capabilities at all, bounding set included: dropped while CAP_SETPCAP is still there. */
  for (int cap = 0; cap <= 63; ++cap) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  if (uid != 0 && geteuid() == 0) {
    if (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      perror("as_unit: cannot become the unit's user");
      return 1;
    }
  }
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &header, data) != 0) {
    perror("as_unit: capset");
    return 1;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(ctx) != 0) {
    perror("as_unit: seccomp_load");
    return 1;
  }
  seccomp_release(ctx);
  fprintf(stderr, "as_unit: %d system calls allowed, uid %d\n", allowed, (int)getuid());
  execv(argv[3], argv + 3);
  perror("as_unit: exec");
  return 127;
}

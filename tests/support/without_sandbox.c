/* without_sandbox PROGRAM ARGS...: runs PROGRAM on a "kernel" without Landlock and without
 * seccomp filters, as an old kernel or qemu-user would offer it: landlock_create_ruleset and
 * seccomp answer ENOSYS, prctl(PR_SET_SECCOMP) EINVAL, for PROGRAM and everything it starts. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/prctl.h>
#include <seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: without_sandbox PROGRAM ARGS...\n");
    return 2;
  }
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL ||
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(landlock_create_ruleset), 0) != 0 ||
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(seccomp), 0) != 0 ||
      seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(prctl), 1,
                       SCMP_A0(SCMP_CMP_EQ, PR_SET_SECCOMP)) != 0) {
    fprintf(stderr, "without_sandbox: cannot build the filter\n");
    return 1;
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(ctx) != 0) {
    perror("without_sandbox: seccomp_load");
    return 1;
  }
  seccomp_release(ctx);
  execv(argv[1], argv + 1);
  perror("without_sandbox: exec");
  return 127;
}

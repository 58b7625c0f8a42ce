/* Hostile functions, for the isolation tests: each tries one way to reach beyond its own job —
 * another process, the daemon, a later job, the module cache, the network. A function returns
 * the errno of the call the worker's sandbox refused (EPERM is 1, EACCES 13), or 0 when the
 * attack went through, which the tests count as a failure of the sandbox. */
#pragma once

#include <errno.h>

#define UNUSED (void)args, (void)num_args
#define REFUSED(call) ((call) == -1 ? errno : 0)

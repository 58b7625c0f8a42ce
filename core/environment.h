// The environment manifest: what someone needs to trust or reproduce a number — software,
// host, CPU state and load, and the measuring process's placement — read when the measurement
// runs. Fields that a host does not expose read "unavailable" rather than being left out.
#pragma once

#include "core/metric.h"

namespace kprof::core {

// "kprofd version", "Host", "Kernel", "CPU model", "CPUs online", "CPU governor",
// "CPU frequency (MHz)" (and "CPU frequency min (MHz)", "... max (MHz)" where readable), "SMT",
// "Turbo", "Load average", "Runnable processes", "Worker CPU affinity", "Worker priority".
MetricMap EnvironmentManifest();

// The calling process can no longer change its CPU affinity or priority (a worker under its
// syscall filter, which denies it that): EnvironmentManifest reads them once from now on rather
// than for every manifest.
void PlacementIsFixed();

}  // namespace kprof::core

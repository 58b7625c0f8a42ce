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

}  // namespace kprof::core

// The environment manifest: what someone needs to trust or reproduce a number — software,
// host, CPU state and load, and the measuring process's placement — read when the measurement
// runs. Fields that a host does not expose read "unavailable" rather than being left out.
#pragma once

#include <cstdint>
#include <memory>

#include "report/metric.h"

namespace kprof::core {

// "kprofd version", "Host", "Kernel", "OS" (os-release's name), "Jetson" (a Jetson's JetPack and
// L4T releases; only there), "CPU model", "CPUs online", "CPU governor",
// "CPU frequency (MHz)" (and "CPU frequency min (MHz)", "... max (MHz)" where readable), "SMT",
// "Turbo", "Load average", "Runnable processes", "Worker CPU affinity", "Worker priority".
report::MetricMap EnvironmentManifest();

// The manifest in two parts: what a host keeps from one job to the next (the software, the
// host, the processor, the host's settings, and a placement that is fixed) and what each job
// reads afresh (the clock, the load, a placement that is not fixed, a Jetson's clocks). The
// host part is read at most once a second and shared; `host_generation` changes whenever its
// content does, so a process that has sent it once sends it again only then (a worker: the
// front attaches it to every result). The two parts never name the same field.
struct Environment {
  std::shared_ptr<const report::MetricMap> host;
  uint64_t host_generation = 0;
  report::MetricMap job;
};
Environment ReadEnvironment();

// The calling process can no longer change its CPU affinity or priority (a worker under its
// syscall filter, which denies it that): EnvironmentManifest reads them once from now on rather
// than for every manifest.
void PlacementIsFixed();

}  // namespace kprof::core

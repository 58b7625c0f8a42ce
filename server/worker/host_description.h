// What this host has — its devices and the collectors each can use — as GetInfo reports it.
// A worker answers a DescribeRequest with it, once, when the daemon starts: PAPI's tables, the
// CUDA driver and NVML are then loaded only by a process that ends, never by the daemon, and a
// cuInit that hangs is a worker killed at a deadline. gRPC-free: it runs inside kprofd-worker.
#pragma once

#include "server/ipc/worker.pb.h"

namespace kprof::server {

// cpu:0: the processor model, the CPUs this process may use, and the collectors (rusage; perf
// with whether it can count here; PAPI's presets and components; RAPL and Tegra rails where
// the host has them).
kprof::worker::v1::HostDescription DescribeCpu();

// Each GPU the CUDA driver reports, with its collectors, and the line GetInfo shows for them;
// or, in cuda_unavailable, why there are none.
kprof::worker::v1::HostDescription DescribeCuda();

}  // namespace kprof::server

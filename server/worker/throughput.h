// A time evaluation's throughput (kprof.v1.Throughput): the bytes a call moves per second at the
// median call, against the device's peak for data of its size; and for a strict job, whether
// that speed is one the hardware allows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/device.h"
#include "core/args/arg_spec.h"
#include "kprof/v1/kprof.pb.h"

namespace kprof::server {

// How far past the peak a strict job may measure before it fails as impossible.
inline constexpr double kImpossibleMargin = 2.0;

// A GPU's L2 peak, in times its memory's (the driver tells no L2 bandwidth).
inline constexpr double kL2OverMemory = 4.0;

struct Peaks {
  double memory = 0;         // bytes a second through memory (DeviceInfo.peak_bandwidth_gbps)
  double cache = 0;          // within the caches (cpu), 0 when unknown
  uint64_t cache_bytes = 0;  // the largest data the cache peak applies to (last level, or L2)
  int parallel = 1;          // CPUs a worker may use (each has its caches and its share of memory)
};

// The throughput of calls of `median` seconds on arguments `specs`, with the request's counts.
kprof::v1::Throughput ThroughputOf(const std::vector<core::ArgSpec>& specs,
                                   const kprof::v1::Counts& counts, double median,
                                   const Peaks& peaks);

// OK, or ABORTED naming the figures when `throughput` is more than kImpossibleMargin times the
// peak: "impossible speed: ...". `device` names the device.
absl::Status CheckPossible(const kprof::v1::Throughput& throughput, base::Device device);

// The worker's peaks on `device`: the request's, the cache's extent and the CPUs it may use.
Peaks PeaksOf(double memory_bandwidth, double cache_bandwidth, base::Device device);

}  // namespace kprof::server

#include "server/worker/throughput.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "core/cuda/cuda_backend.h"
#include "core/host/cpu_info.h"
#include "core/measure/profiler.h"

namespace kprof::server {

kprof::v1::Throughput ThroughputOf(const std::vector<core::ArgSpec>& specs,
                                   const kprof::v1::Counts& counts, double median,
                                   const Peaks& peaks) {
  kprof::v1::Throughput t;
  int64_t bytes = counts.bytes();
  if (bytes <= 0) {
    bytes = 0;
    for (const core::ArgSpec& spec : specs) {
      if (!spec.shape.empty()) bytes += static_cast<int64_t>(spec.num_bytes);  // not scalars
    }
  }
  t.set_bytes_per_call(bytes);
  // A call of no time at all moves its bytes infinitely fast.
  const auto per_second = [median](double amount) {
    if (amount <= 0) return 0.0;
    return median > 0 ? amount / median : std::numeric_limits<double>::infinity();
  };
  t.set_bytes_per_second(per_second(static_cast<double>(bytes)));
  t.set_items_per_second(per_second(static_cast<double>(counts.items())));
  t.set_flop_per_second(per_second(static_cast<double>(counts.flop())));
  const bool cached = peaks.cache > 0 && static_cast<uint64_t>(bytes) <= peaks.cache_bytes;
  const double peak = (cached ? peaks.cache : peaks.memory) * peaks.parallel;
  t.set_peak(cached ? "cache" : "memory");
  if (peak > 0) {
    t.set_peak_bytes_per_second(peak);
    t.set_fraction_of_peak(t.bytes_per_second() / peak);
  }
  return t;
}

absl::Status CheckPossible(const kprof::v1::Throughput& t, base::Device device) {
  if (t.peak_bytes_per_second() <= 0 || t.fraction_of_peak() <= kImpossibleMargin) {
    return absl::OkStatus();
  }
  return absl::AbortedError(absl::StrFormat(
      "impossible speed: %d bytes a call read and written at %.4g bytes a second is %.3gx "
      "%s's peak for data of that size (%.4g bytes a second through its %s); more than %.0fx "
      "it fails a strict job",
      t.bytes_per_call(), t.bytes_per_second(), t.fraction_of_peak(), base::DeviceSpec(device),
      t.peak_bytes_per_second(), t.peak(), kImpossibleMargin));
}

Peaks PeaksOf(double memory_bandwidth, double cache_bandwidth, base::Device device) {
  Peaks peaks;
  peaks.memory = memory_bandwidth;
  peaks.cache = cache_bandwidth;
  if (device.type == base::DeviceType::kCpu) {
    // Read once: a worker's CPUs and caches do not change, and every time evaluation asks.
    static const int cpus = std::max(core::AvailableCpus(), 1);
    static const auto last_level = static_cast<uint64_t>(core::LastLevelCacheBytes().value_or(0));
    peaks.parallel = cpus;
    peaks.cache_bytes = last_level;
  } else if (const absl::StatusOr<int64_t> l2 = core::CudaL2Bytes(device.id); l2.ok()) {
    // The driver tells no L2 bandwidth: data that fit the L2 are held to four times the
    // memory's (an L2's is two to three times it on the GPUs of the last generations).
    peaks.cache_bytes = static_cast<uint64_t>(*l2);
    if (peaks.cache <= 0) peaks.cache = kL2OverMemory * memory_bandwidth;
  }
  return peaks;
}

}  // namespace kprof::server

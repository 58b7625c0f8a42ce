// Throttling: repeats taken while the measuring CPU's (or GPU's) clock was below a fraction of
// its nominal clock (nvbench's --throttle-threshold) are marked, so that a thermal or power cap
// that slowed some repeats shows in the result, and they can be dropped.
//
// The clock is read before and after each repeat. A CPU's is cpufreq's scaling_cur_freq, its
// nominal cpufreq's base_frequency where the driver gives it (intel_pstate), else
// cpuinfo_max_freq; hosts without cpufreq (most VMs) cannot tell: `unavailable()` says why. A
// GPU's comes from NVML (GpuThrottleMonitor in core/collectors/nvml_collector.h), with the
// reasons its clock was held back.
//
//   ThrottleMonitor monitor = ThrottleMonitor::ForCpu(0.75, "/", sched_getcpu());
//   monitor.Before();  Repeat();  monitor.After();
//   monitor.throttled();  // one flag per repeat
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kprof::core {

// The default fraction of the nominal clock below which a repeat counts as throttled.
inline constexpr double kDefaultThrottleThreshold = 0.75;

// The nominal clock of `cpu` under `root` (kHz); < 0 when sysfs does not say.
int64_t NominalCpuKhz(const std::string& root, int cpu);

// A clock to watch.
struct WatchedClock {
  std::string name = "CPU";           // in messages: "the CPU clock was below ..."
  int64_t nominal_khz = -1;           // > 0 for a working monitor
  std::function<int64_t()> read_khz;  // the clock now; < 0: unreadable
  // Optional: the reasons the clock is held back now, as a bit mask (NVML's).
  std::function<uint64_t()> read_reasons;
  // Why the clock cannot be watched at all ("" when it can).
  std::string unavailable;
  // Reasons that mean the device had nothing to do when the clock was read (NVML's GpuIdle): a
  // reading before a repeat taken with one of them set is not held against the repeat, since an
  // idle GPU clocks down until work comes.
  uint64_t idle_reasons = 0;
};

class ThrottleMonitor {
 public:
  // A CPU clock: `read_khz` reads it now (< 0: unreadable); `nominal_khz` > 0 for a working
  // monitor.
  ThrottleMonitor(double threshold, int64_t nominal_khz, std::function<int64_t()> read_khz);
  ThrottleMonitor(double threshold, WatchedClock clock);

  // The monitor of `cpu`'s clock under `root`.
  static ThrottleMonitor ForCpu(double threshold, const std::string& root, int cpu);

  // "" when the clock can be compared with its nominal; else why not.
  const std::string& unavailable() const { return unavailable_; }

  // Around each repeat. A repeat is throttled when either reading was below threshold × nominal;
  // one that could not be read is not.
  void Before();
  void After();

  const std::vector<bool>& throttled() const { return throttled_; }
  int64_t count() const;
  // Per repeat, the reasons read before or after it (0 without read_reasons).
  const std::vector<uint64_t>& reasons() const { return reasons_; }

  // "the CPU clock was below 75% of its nominal 3000 MHz"
  std::string Describe() const;

 private:
  bool Low(int64_t khz) const;

  double threshold_;
  WatchedClock clock_;
  std::string unavailable_;
  int64_t before_ = -1;
  uint64_t reasons_before_ = 0;
  std::vector<bool> throttled_;
  std::vector<uint64_t> reasons_;
};

}  // namespace kprof::core

// ClockWatch: the clocks a timed job's repeats are watched on (the CPU's, and on a CUDA device
// the GPU's through NVML), and SetThrottled, which marks or drops the repeats taken below the
// throttle threshold. LocalRunner::Time's part, apart so that its driver reads as its steps.
#pragma once

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/collectors/nvml_collector.h"
#include "core/host/throttle.h"
#include "core/measure/local_runner.h"

namespace kprof::core {

// The clocks a job's repeats are watched on: the CPU's, which runs the function or launches the
// kernel, and on a CUDA device the GPU's as well (through NVML, with its reasons).
class ClockWatch {
 public:
  ClockWatch(const Job& job, const TimeJob& time) {
    monitors_.push_back(
        ThrottleMonitor::ForCpu(time.throttle_threshold, time.sysfs_root, sched_getcpu()));
    if (job.device.type == base::DeviceType::kCuda) {
      monitors_.push_back(GpuThrottleMonitor(time.throttle_threshold, job.device.id));
    }
  }
  void Before() {
    for (ThrottleMonitor& m : monitors_) m.Before();
  }
  void After() {
    for (ThrottleMonitor& m : monitors_) m.After();
  }
  // Per repeat: below the threshold on any clock.
  std::vector<bool> Throttled() const {
    std::vector<bool> any;
    for (const ThrottleMonitor& m : monitors_) {
      any.resize(std::max(any.size(), m.throttled().size()), false);
      for (size_t i = 0; i < m.throttled().size(); ++i) any[i] = any[i] || m.throttled()[i];
    }
    return any;
  }
  // Per repeat, the reasons NVML gave for holding the GPU's clock back (idle left out).
  std::vector<uint64_t> Reasons() const {
    std::vector<uint64_t> reasons;
    for (const ThrottleMonitor& m : monitors_) {
      reasons.resize(std::max(reasons.size(), m.reasons().size()), 0);
      for (size_t i = 0; i < m.reasons().size(); ++i) reasons[i] |= m.reasons()[i] & ~kNvmlGpuIdle;
    }
    return reasons;
  }
  // "the CPU clock was below 75% of its nominal 3000 MHz", of the clocks that were.
  std::string Describe() const {
    std::string text;
    for (const ThrottleMonitor& m : monitors_) {
      if (m.count() > 0) absl::StrAppend(&text, text.empty() ? "" : "; ", m.Describe());
    }
    return text;
  }
  // Why some clock could not be watched ("" when all could).
  std::string Unavailable() const {
    std::string text;
    for (const ThrottleMonitor& m : monitors_) {
      if (!m.unavailable().empty()) {
        absl::StrAppend(&text, text.empty() ? "" : "; ", m.unavailable());
      }
    }
    return text;
  }

 private:
  std::vector<ThrottleMonitor> monitors_;
};

// Notes the throttled repeats of `result`, or drops them (and then takes the spread and the
// outliers again, of the repeats left), and names the GPU's clock-event reasons of the repeats
// kept. FAILED_PRECONDITION when every repeat was throttled.
absl::Status SetThrottled(const ClockWatch& watch, const TimeJob& time, OutlierFilter outliers,
                          TimeResult& result);

}  // namespace kprof::core

#include "core/host/throttle.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "base/read_file.h"
#include "core/host/interference.h"

namespace kprof::core {

int64_t NominalCpuKhz(const std::string& root, int cpu) {
  for (const char* file : {"base_frequency", "cpuinfo_max_freq"}) {
    const std::optional<std::string> text = base::ReadFirstLine(
        absl::StrFormat("%ssys/devices/system/cpu/cpu%d/cpufreq/%s", root, cpu, file));
    int64_t khz = 0;
    if (text.has_value() && absl::SimpleAtoi(*text, &khz) && khz > 0) return khz;
  }
  return -1;
}

namespace {

// NominalCpuKhz of the real host, read once per CPU: it does not change, and a worker asks at
// every job.
int64_t HostNominalKhz(int cpu) {
  static absl::Mutex mutex;
  static auto* known = new std::map<int, int64_t>();
  absl::MutexLock lock(&mutex);
  const auto [it, inserted] = known->emplace(cpu, 0);
  if (inserted) it->second = NominalCpuKhz("/", cpu);
  return it->second;
}

}  // namespace

ThrottleMonitor::ThrottleMonitor(double threshold, int64_t nominal_khz,
                                 std::function<int64_t()> read_khz)
    : ThrottleMonitor(threshold,
                      WatchedClock{"CPU", nominal_khz, std::move(read_khz), nullptr,
                                   nominal_khz <= 0 ? "the CPU's nominal clock is unknown here "
                                                      "(no cpufreq in sysfs)"
                                                    : ""}) {
  if (unavailable_.empty() && clock_.read_khz() < 0) {
    unavailable_ = "the CPU's clock cannot be read here (no cpufreq scaling_cur_freq)";
  }
}

ThrottleMonitor::ThrottleMonitor(double threshold, WatchedClock clock)
    : threshold_(threshold), clock_(std::move(clock)), unavailable_(clock_.unavailable) {
  if (unavailable_.empty() && clock_.nominal_khz <= 0) {
    unavailable_ = absl::StrFormat("the %s's nominal clock is unknown here", clock_.name);
  }
  if (unavailable_.empty() && !clock_.read_khz) {
    unavailable_ = absl::StrFormat("the %s's clock has no reader here", clock_.name);
  }
}

ThrottleMonitor ThrottleMonitor::ForCpu(double threshold, const std::string& root, int cpu) {
  if (cpu < 0) return ThrottleMonitor(threshold, -1, [] { return int64_t{-1}; });
  return ThrottleMonitor(threshold, root == "/" ? HostNominalKhz(cpu) : NominalCpuKhz(root, cpu),
                         [root, cpu] { return CpuKhz(root, cpu); });
}

bool ThrottleMonitor::Low(int64_t khz) const {
  return khz >= 0 &&
         static_cast<double>(khz) < threshold_ * static_cast<double>(clock_.nominal_khz);
}

void ThrottleMonitor::Before() {
  if (!unavailable_.empty()) return;
  before_ = clock_.read_khz();
  reasons_before_ = clock_.read_reasons ? clock_.read_reasons() : 0;
}

void ThrottleMonitor::After() {
  if (!unavailable_.empty()) {
    throttled_.push_back(false);
    reasons_.push_back(0);
    return;
  }
  const int64_t after = clock_.read_khz();
  // Idle before the repeat: that reading tells how low the clock rests, not how the repeat ran.
  const bool idle_before = (reasons_before_ & clock_.idle_reasons) != 0;
  throttled_.push_back((Low(before_) && !idle_before) || Low(after));
  reasons_.push_back(reasons_before_ | (clock_.read_reasons ? clock_.read_reasons() : 0));
}

int64_t ThrottleMonitor::count() const {
  return std::count(throttled_.begin(), throttled_.end(), true);
}

std::string ThrottleMonitor::Describe() const {
  return absl::StrFormat("the %s clock was below %.0f%% of its nominal %d MHz", clock_.name,
                         threshold_ * 100, clock_.nominal_khz / 1000);
}

}  // namespace kprof::core

#include "core/host/interference.h"

#include <sched.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "base/read_file.h"
#include "core/host/tegra_clocks.h"

namespace kprof::core {
namespace {

// Both readings known, and apart by the frequency threshold or more.
bool ClockMoved(int64_t before_khz, int64_t after_khz, const InterferenceThresholds& thresholds) {
  if (before_khz <= 0 || after_khz <= 0) return false;
  return std::abs(static_cast<double>(after_khz - before_khz)) / static_cast<double>(before_khz) >=
         thresholds.frequency;
}

// The host's CPUs whose cpufreq node was found missing (a VM has none): such nodes do not
// come and go while a process runs, and looking again would cost every job an open per sample.
// Fake trees (tests) are looked at every time.
class AbsentClocks {
 public:
  bool Known(const std::string& root, int cpu) {
    if (root != "/") return false;
    absl::MutexLock lock(&mutex_);
    return cpus_.count(cpu) > 0;
  }
  void Mark(const std::string& root, int cpu) {
    if (root != "/") return;
    absl::MutexLock lock(&mutex_);
    cpus_.insert(cpu);
  }

 private:
  absl::Mutex mutex_;
  std::set<int> cpus_ ABSL_GUARDED_BY(mutex_);
};

AbsentClocks& Absent() {
  static AbsentClocks* const absent = new AbsentClocks;
  return *absent;
}

// "12.3 ms", "850 us", "2.51 s".
std::string Milliseconds(double ms) {
  if (ms >= 1000) return absl::StrFormat("%.2f s", ms / 1000);
  if (ms >= 1) return absl::StrFormat("%.1f ms", ms);
  return absl::StrFormat("%.0f us", ms * 1000);
}

}  // namespace

// The host's load average from sysinfo(2), which hands over the kernel's fixed-point figure
// where reading /proc/loadavg has it formatted first. The kernel computes it every 5 s, so a
// figure read less than a millisecond ago is the figure now (but across the one tick in 5000):
// a batch of short jobs samples it before and after each without a system call each time.
// -1 when it cannot be read.
double HostLoadAverage() {
  static std::atomic<int64_t> read_at{-1};  // steady-clock nanoseconds; -1: never
  static std::atomic<double> last{-1};
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  if (const int64_t at = read_at.load(std::memory_order_acquire);
      at >= 0 && now >= at && now - at < 1'000'000) {
    return last.load(std::memory_order_relaxed);
  }
  struct sysinfo info {};
  const double load =
      sysinfo(&info) == 0 ? static_cast<double>(info.loads[0]) / (1 << SI_LOAD_SHIFT) : -1;
  last.store(load, std::memory_order_relaxed);
  read_at.store(now, std::memory_order_release);
  return load;
}

// The calling thread's schedstat: "RUN_NS WAIT_NS TIMESLICES". The host's is read through a
// descriptor kept open per thread (ReadKeptOpen; a thread's number, once its thread is gone,
// reads as an error and is opened again for the next thread of that number).
void ReadSchedstat(const std::string& root, SystemSample* sample) {
  const std::string text =
      root == "/" ? base::ReadKeptOpen(absl::StrCat("/proc/self/task/", gettid(), "/schedstat"))
                  : base::ReadFirstLine(root + "proc/thread-self/schedstat").value_or("");
  const std::vector<absl::string_view> fields =
      absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  int64_t run = -1, wait = -1;
  if (fields.size() >= 2 && absl::SimpleAtoi(fields[0], &run) &&
      absl::SimpleAtoi(fields[1], &wait) && run >= 0 && wait >= 0) {
    sample->thread_run_ns = run;
    sample->thread_wait_ns = wait;
  }
}

SystemSample SampleSystem(const std::string& root, int cpu) {
  SystemSample sample;
  // The host's own figure (HostLoadAverage); a test's root from its file.
  std::string text;
  if (root == "/") {
    sample.load_average = HostLoadAverage();
  } else if (std::optional<std::string> line = base::ReadFirstLine(root + "proc/loadavg")) {
    text = line->substr(0, line->find(' '));
    if (double load = 0; absl::SimpleAtod(text, &load) && load >= 0) sample.load_average = load;
  }
  sample.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  sample.cpu = cpu >= 0 ? cpu : sched_getcpu();
  if (sample.cpu >= 0) sample.cpu_khz = CpuKhz(root, sample.cpu);
  sample.gpu_khz = TegraGpuKhz(root);
  ReadSchedstat(root, &sample);
  return sample;
}

int64_t CpuKhz(const std::string& root, int cpu) {
  if (Absent().Known(root, cpu)) return -1;
  const std::optional<std::string> text = base::ReadFirstLine(
      absl::StrFormat("%ssys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", root, cpu));
  if (!text) {
    Absent().Mark(root, cpu);
    return -1;
  }
  int64_t khz = -1;
  if (!absl::SimpleAtoi(*text, &khz) || khz <= 0) return -1;
  return khz;
}

double CpuWaitShare(const SystemSample& before, const SystemSample& after) {
  const double wall_ns = (after.seconds - before.seconds) * 1e9;
  const int64_t wait_ns = after.thread_wait_ns - before.thread_wait_ns;
  if (before.thread_wait_ns < 0 || after.thread_wait_ns < 0 || wait_ns < 0 || !(wall_ns > 0)) {
    return -1;
  }
  return std::min(1.0, static_cast<double>(wait_ns) / wall_ns);
}

std::vector<std::string> InterferenceWarnings(const SystemSample& before, const SystemSample& after,
                                              const InterferenceThresholds& thresholds) {
  std::vector<std::string> warnings;
  const double own = 1 - std::exp(-std::max(0.0, after.seconds - before.seconds) / 60);
  const double rise = after.load_average - before.load_average;
  if (before.load_average >= 0 && after.load_average >= 0 &&
      (rise >= thresholds.load_average + own || -rise >= thresholds.load_average)) {
    warnings.push_back(absl::StrFormat(
        "the load average moved from %.2f to %.2f during the measurement (threshold %.2f): other "
        "work competed for the CPUs",
        before.load_average, after.load_average, thresholds.load_average));
  }
  // Under a millisecond in all is no sign of a busy host, whatever its share of a short
  // measurement: wakeups, and the daemon's own threads answering beside it on a small host
  // (100-300 us of a 3 ms batch job, measured on 2 CPUs). A task that competes for the CPU
  // takes whole slices of it (0.75 ms and more).
  const double wait_share = CpuWaitShare(before, after);
  const double wait_ms = static_cast<double>(after.thread_wait_ns - before.thread_wait_ns) / 1e6;
  if (wait_share >= thresholds.cpu_wait && wait_ms >= 1) {
    warnings.push_back(absl::StrFormat(
        "the host was busy: the measuring thread waited for a CPU %.0f%% of the measurement "
        "(%s of %s; threshold %.0f%%), so other work took a share of the times",
        wait_share * 100, Milliseconds(wait_ms),
        Milliseconds((after.seconds - before.seconds) * 1e3), thresholds.cpu_wait * 100));
  }
  if (before.cpu == after.cpu && ClockMoved(before.cpu_khz, after.cpu_khz, thresholds)) {
    warnings.push_back(absl::StrFormat(
        "the clock of CPU %d moved from %d MHz to %d MHz during the measurement (threshold "
        "%.0f%%): frequency scaling changed the speed",
        before.cpu, before.cpu_khz / 1000, after.cpu_khz / 1000, thresholds.frequency * 100));
  }
  if (ClockMoved(before.gpu_khz, after.gpu_khz, thresholds)) {
    warnings.push_back(absl::StrFormat(
        "the GPU clock moved from %d MHz to %d MHz during the measurement (threshold %.0f%%): "
        "DVFS changed the speed (sudo jetson_clocks locks it)",
        before.gpu_khz / 1000, after.gpu_khz / 1000, thresholds.frequency * 100));
  }
  return warnings;
}

}  // namespace kprof::core

// Interference: what moved on the host while a measurement ran. A sample of the load average
// and of the measuring CPU's clock is taken before and after; a change beyond a threshold
// becomes a warning in the result, so a number taken while the machine was busy or the clock
// was moving says so.
//
//   SystemSample before = SampleSystem();
//   Measure();
//   std::vector<std::string> warnings =
//       InterferenceWarnings(before, SampleSystem("/", before.cpu));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kprof::core {

struct SystemSample {
  double load_average = -1;  // one-minute load average; < 0 when unreadable
  int cpu = -1;              // the CPU whose clock was read; < 0 when unknown
  int64_t cpu_khz = -1;      // that CPU's current clock; < 0 when unreadable
  double seconds = 0;        // when it was taken, on the monotonic clock
  int64_t gpu_khz = -1;      // a Tegra board's GPU clock (devfreq); < 0 elsewhere
  // The calling thread's time on a CPU and waiting in a run queue for one, from its schedstat;
  // < 0 when the kernel does not say.
  int64_t thread_run_ns = -1;
  int64_t thread_wait_ns = -1;
};

// Reads the load average, cpufreq/scaling_cur_freq of `cpu` (by default, the one the calling
// thread runs on) and the calling thread's schedstat under `root`; tests pass a fake tree shaped
// like the real one. The "after" sample names the "before" sample's CPU, so the same clock is
// compared when the thread moved.
SystemSample SampleSystem(const std::string& root = "/", int cpu = -1);

// The clock of `cpu` now, as SampleSystem reads it; < 0 when unreadable.
int64_t CpuKhz(const std::string& root, int cpu);

struct InterferenceThresholds {
  double load_average = 0.5;  // absolute change of the one-minute load average
  double frequency = 0.05;    // relative change of the clock
  double cpu_wait = 0.05;     // share of the time between the samples spent waiting for a CPU
};

// The share of the wall time between two samples of one thread that it spent waiting for a CPU
// (0 to 1): what other work took from it. < 0 when either sample lacks its schedstat.
double CpuWaitShare(const SystemSample& before, const SystemSample& after);

// One sentence per thing that moved beyond its threshold, naming before and after, and one when
// the measuring thread waited for a CPU for cpu_wait of the time or more (a host busy all along
// moves no load average); nothing for what either sample could not read. A rise of the load average
// is judged net of what the measurement itself adds: one busy thread for t seconds lifts the
// one-minute average by up to 1 - exp(-t / 60).
std::vector<std::string> InterferenceWarnings(const SystemSample& before, const SystemSample& after,
                                              const InterferenceThresholds& thresholds = {});

}  // namespace kprof::core

// PerfCollector ("perf:EVENT,EVENT..."): Linux perf_event_open counters scoped to the thread
// that runs the function. Software events (task-clock, page-faults, context-switches,
// cpu-migrations, minor-faults, major-faults) count everywhere, VMs included; hardware events
// (cycles, instructions, cache-references, cache-misses, branch-instructions, branch-misses)
// where the host has a PMU. Events count in user and kernel mode where the kernel allows it
// (root, CAP_PERFMON, perf_event_paranoid <= 1), else in user mode only — except the software
// events the kernel takes in kernel mode (faults, context switches, migrations), which would
// then read 0: those come from the thread's own accounting (getrusage, /proc/thread-self/sched),
// which the kernel keeps in every domain for any user. "perf domain" says which was counted.
// Counts that the kernel multiplexed are scaled by time enabled over time running, and the
// smallest such ratio is reported.
#pragma once

#include <string>
#include <vector>

#include "core/collectors/metric_collector.h"

namespace kprof::core {

// The metric holding min(time running / time enabled) over the events: 1 unless multiplexed.
inline constexpr std::string_view kPerfRunningRatioMetric = "perf running ratio";

// The metric saying which domain the events counted: "user and kernel", or "user (...)" naming
// the events taken from the thread's accounting.
inline constexpr std::string_view kPerfDomainMetric = "perf domain";

// Whether this process may count kernel-mode events of its own threads (asked of the kernel
// once).
bool PerfCountsTheKernel();

// A thread's own accounting of what perf's kernel-side software events count: getrusage's
// faults and context switches, and /proc/thread-self/sched's migrations when `migrations`
// (FAILED_PRECONDITION naming the event where the kernel has no such count).
struct ThreadAccounting {
  int64_t minor_faults = 0;
  int64_t major_faults = 0;
  int64_t context_switches = 0;
  int64_t migrations = 0;
};
absl::StatusOr<ThreadAccounting> ReadThreadAccounting(bool migrations);

// Whether the kernel exposes a CPU performance-monitoring unit (an event source named cpu,
// cpu_core, cpu_atom or armv*_pmu* under `root`). VMs without PMU passthrough have none: only
// software events count there.
bool HostHasCpuPmu(const std::string& root = "/sys/bus/event_source/devices");

class PerfCollector final : public MetricCollector {
 public:
  // The events, by name. INVALID_ARGUMENT for an unknown name, listing the accepted ones.
  static absl::StatusOr<std::unique_ptr<PerfCollector>> Create(
      const std::vector<std::string>& events);

  // The event names the collector knows.
  static std::vector<std::string> KnownEvents();

  std::string_view name() const override { return "perf"; }

  // Opens each event once on this thread, to say now — FAILED_PRECONDITION naming the event
  // and the kernel's reason — rather than mid-measurement that an event cannot be counted.
  absl::Status Init(const std::vector<base::Device>& devices) override;

  // Counts on the calling thread (the host thread that runs or launches the function).
  absl::StatusOr<std::unique_ptr<Measurement>> Start(base::Device device) override;

 private:
  struct Event {
    std::string name;
    uint32_t type;
    uint64_t config;
  };
  explicit PerfCollector(std::vector<Event> events)
      : events_(std::move(events)), domain_(Domain()) {}
  // Whether `e` is read from the thread's accounting rather than counted by perf.
  static bool Accounted(const Event& e);
  std::string Domain() const;

  std::vector<Event> events_;
  std::string domain_;  // kPerfDomainMetric's value, the same for every measurement
};

}  // namespace kprof::core

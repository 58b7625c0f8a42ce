// Profiler: nested, timed call frames with collector metrics, turned into a Report.
//
// Start opens one "Total" frame per device; StartCall/StopCall open and close call frames,
// which may nest; Stop closes the totals. Each frame has its own timer and collector
// measurements. The device totals are kept in their own list, never among the calls, so the
// report cannot confuse the two.
//
//   RusageCollector rusage;
//   KPROF_ASSIGN_OR_RETURN(auto profiler, Profiler::Create({cpu}, {&rusage}));
//   KPROF_RETURN_IF_ERROR(profiler->Start());
//   KPROF_RETURN_IF_ERROR(profiler->StartCall("matmul", cpu, {{"Argument Shapes", shapes}}));
//   Matmul();
//   KPROF_RETURN_IF_ERROR(profiler->StopCall());
//   KPROF_RETURN_IF_ERROR(profiler->Stop());
//   KPROF_ASSIGN_OR_RETURN(Report report, profiler->GetReport());
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/device.h"
#include "core/collectors/metric_collector.h"
#include "core/device/timer.h"
#include "report/report.h"

namespace kprof::core {

class Profiler {
 public:
  // A profiler over `devices` (at least one). `collectors` are not owned and must outlive
  // the profiler; each is initialised with `devices` here. `configuration` describes the run;
  // "Number of threads" (the CPUs this process may run on) is added unless given.
  static absl::StatusOr<std::unique_ptr<Profiler>> Create(
      std::vector<base::Device> devices, std::vector<MetricCollector*> collectors,
      report::MetricMap configuration = {}, TimerRegistry* timers = &TimerRegistry::Global());

  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Opens the "Total" frame of every device. FAILED_PRECONDITION if already started.
  absl::Status Start();

  // Opens a call frame named `name` on `device`; `extra_metrics` join its row ("Argument
  // Shapes", say). FAILED_PRECONDITION unless started.
  absl::Status StartCall(std::string name, base::Device device,
                         report::MetricMap extra_metrics = {});

  // Closes the innermost open call frame, adding `extra_metrics` to its row.
  // FAILED_PRECONDITION when no call is open.
  absl::Status StopCall(report::MetricMap extra_metrics = {});

  // Closes the device totals. FAILED_PRECONDITION while calls are still open.
  absl::Status Stop();

  bool is_running() const { return running_; }

  // The report of a stopped run: a row per call (Duration, Count 1, Name, Device, Percent of
  // the longest device total, extra and collector metrics), device totals in device_metrics,
  // and the configuration. FAILED_PRECONDITION before Stop.
  absl::StatusOr<report::Report> GetReport();

 private:
  struct Frame;

  Profiler(std::vector<base::Device> devices, std::vector<MetricCollector*> collectors,
           report::MetricMap configuration, TimerRegistry* timers);
  absl::StatusOr<Frame> OpenFrame(std::string name, base::Device device,
                                  report::MetricMap extra_metrics);
  static absl::Status CloseFrame(Frame& frame, report::MetricMap extra_metrics);
  static report::MetricMap FrameRow(Frame& frame);

  std::vector<base::Device> devices_;
  std::vector<MetricCollector*> collectors_;
  report::MetricMap configuration_;
  TimerRegistry* timers_;
  bool running_ = false;
  bool stopped_ = false;
  std::vector<Frame> totals_;     // one per device, in the order of devices_
  std::vector<Frame> in_flight_;  // open call frames, innermost last
  std::vector<Frame> calls_;      // closed call frames, in the order they closed
};

// The number of CPUs this process may run on (its affinity mask), at least 1.
int AvailableCpus();

}  // namespace kprof::core

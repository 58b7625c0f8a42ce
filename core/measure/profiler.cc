#include "core/measure/profiler.h"

#include <sched.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kprof::core {

struct Profiler::Frame {
  std::string name;
  base::Device device;
  std::unique_ptr<Timer> timer;
  report::MetricMap metrics;
  std::vector<std::unique_ptr<MetricCollector::Measurement>> measurements;
};

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

absl::StatusOr<std::unique_ptr<Profiler>> Profiler::Create(std::vector<base::Device> devices,
                                                           std::vector<MetricCollector*> collectors,
                                                           report::MetricMap configuration,
                                                           TimerRegistry* timers) {
  if (devices.empty()) return absl::InvalidArgumentError("a profiler needs at least one device");
  for (MetricCollector* collector : collectors) {
    if (collector == nullptr) return absl::InvalidArgumentError("null metric collector");
    const absl::Status status = collector->Init(devices);
    if (!status.ok()) {
      return absl::Status(status.code(), absl::StrCat("collector '", std::string(collector->name()),
                                                      "': ", std::string(status.message())));
    }
  }
  configuration.try_emplace("Number of threads", report::Count{AvailableCpus()});
  return std::unique_ptr<Profiler>(
      new Profiler(std::move(devices), std::move(collectors), std::move(configuration), timers));
}

Profiler::Profiler(std::vector<base::Device> devices, std::vector<MetricCollector*> collectors,
                   report::MetricMap configuration, TimerRegistry* timers)
    : devices_(std::move(devices)),
      collectors_(std::move(collectors)),
      configuration_(std::move(configuration)),
      timers_(timers) {}

Profiler::~Profiler() = default;

absl::StatusOr<Profiler::Frame> Profiler::OpenFrame(std::string name, base::Device device,
                                                    report::MetricMap extra_metrics) {
  Frame frame{std::move(name), device, nullptr, std::move(extra_metrics), {}};
  // Collectors start before the timer and stop after it, so their own cost stays outside the
  // timed region.
  for (MetricCollector* collector : collectors_) {
    KPROF_ASSIGN_OR_RETURN(auto measurement, collector->Start(device));
    if (measurement != nullptr) frame.measurements.push_back(std::move(measurement));
  }
  KPROF_ASSIGN_OR_RETURN(frame.timer, timers_->Create(device));
  frame.timer->Start();
  KPROF_RETURN_IF_ERROR(frame.timer->status());
  return frame;
}

absl::Status Profiler::CloseFrame(Frame& frame, report::MetricMap extra_metrics) {
  frame.timer->Stop();
  // Reading the timer waits for the region's device work (a CUDA event timer synchronises on
  // its stop event): it must be over before collectors read what it cost (a GPU's energy), and
  // a fault inside the region is this frame's error.
  (void)frame.timer->ElapsedNanos();
  KPROF_RETURN_IF_ERROR(frame.timer->status());
  for (auto& [name, value] : extra_metrics) frame.metrics[name] = std::move(value);
  for (auto& measurement : frame.measurements) {
    KPROF_ASSIGN_OR_RETURN(report::MetricMap metrics, measurement->Stop());
    for (auto& [name, value] : metrics) frame.metrics[name] = std::move(value);
  }
  frame.measurements.clear();
  return absl::OkStatus();
}

absl::Status Profiler::Start() {
  if (running_ || stopped_) {
    return absl::FailedPreconditionError("profiler already started; create a new one per run");
  }
  for (base::Device device : devices_) {
    absl::StatusOr<Frame> total = OpenFrame("Total", device, {});
    if (!total.ok()) {
      totals_.clear();
      return total.status();
    }
    totals_.push_back(*std::move(total));
  }
  running_ = true;
  return absl::OkStatus();
}

absl::Status Profiler::StartCall(std::string name, base::Device device,
                                 report::MetricMap extra_metrics) {
  if (!running_) {
    return absl::FailedPreconditionError(
        absl::StrCat("StartCall('", name, "') on a profiler that is not running"));
  }
  KPROF_ASSIGN_OR_RETURN(Frame frame, OpenFrame(std::move(name), device, std::move(extra_metrics)));
  in_flight_.push_back(std::move(frame));
  return absl::OkStatus();
}

absl::Status Profiler::StopCall(report::MetricMap extra_metrics) {
  if (in_flight_.empty()) return absl::FailedPreconditionError("StopCall with no call open");
  Frame frame = std::move(in_flight_.back());
  in_flight_.pop_back();
  KPROF_RETURN_IF_ERROR(CloseFrame(frame, std::move(extra_metrics)));
  calls_.push_back(std::move(frame));
  return absl::OkStatus();
}

absl::Status Profiler::Stop() {
  if (!running_) return absl::FailedPreconditionError("Stop on a profiler that is not running");
  if (!in_flight_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("Stop with ", in_flight_.size(),
                                                      " call(s) still open, innermost '",
                                                      in_flight_.back().name, "'"));
  }
  for (Frame& total : totals_) KPROF_RETURN_IF_ERROR(CloseFrame(total, {}));
  running_ = false;
  stopped_ = true;
  return absl::OkStatus();
}

report::MetricMap Profiler::FrameRow(Frame& frame) {
  // The reference's order: its own metrics first, extra and collector metrics over them.
  report::MetricMap row = {
      {std::string(report::kDurationMetric),
       report::Duration{static_cast<double>(frame.timer->ElapsedNanos()) / 1e3}},
      {std::string(report::kCountMetric), report::Count{1}},
      {std::string(report::kNameMetric), frame.name},
      {std::string(report::kDeviceMetric), base::DeviceString(frame.device)},
  };
  for (const auto& [name, value] : frame.metrics) row[name] = value;
  return row;
}

absl::StatusOr<report::Report> Profiler::GetReport() {
  if (!stopped_) return absl::FailedPreconditionError("GetReport before Stop");
  report::Report report;
  double longest_total_us = 0;
  for (Frame& total : totals_) {
    report::MetricMap row = FrameRow(total);
    if (const auto* d = std::get_if<report::Duration>(&row[std::string(report::kDurationMetric)])) {
      longest_total_us = std::max(longest_total_us, d->microseconds);
    }
    report.device_metrics[base::DeviceString(total.device)] = std::move(row);
  }
  for (Frame& call : calls_) {
    report::MetricMap row = FrameRow(call);
    const auto* d = std::get_if<report::Duration>(&row[std::string(report::kDurationMetric)]);
    const double us = d != nullptr ? d->microseconds : 0;
    row[std::string(report::kPercentMetric)] =
        report::Percent{longest_total_us > 0 ? us / longest_total_us * 100 : 0};
    report.calls.push_back(std::move(row));
  }
  report.configuration = configuration_;
  return report;
}

}  // namespace kprof::core

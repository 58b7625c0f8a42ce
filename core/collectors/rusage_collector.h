// RusageCollector ("rusage"): what the kernel accounts to the measuring thread over a region —
// user and system CPU time, minor and major page faults, voluntary and involuntary context
// switches — from getrusage(RUSAGE_THREAD). Always available, on every device: it measures the
// host thread that runs (or launches) the function.
#pragma once

#include <array>
#include <string_view>

#include "core/collectors/metric_collector.h"

namespace kprof::core {

// The metric names it reports.
inline constexpr std::string_view kUserTimeMetric = "User Time (us)";
inline constexpr std::string_view kSystemTimeMetric = "System Time (us)";
inline constexpr std::string_view kMinorFaultsMetric = "Minor Page Faults";
inline constexpr std::string_view kMajorFaultsMetric = "Major Page Faults";
inline constexpr std::string_view kVoluntarySwitchesMetric = "Voluntary Context Switches";
inline constexpr std::string_view kInvoluntarySwitchesMetric = "Involuntary Context Switches";
inline constexpr std::array<std::string_view, 6> kRusageMetrics = {
    kUserTimeMetric,    kSystemTimeMetric,        kMinorFaultsMetric,
    kMajorFaultsMetric, kVoluntarySwitchesMetric, kInvoluntarySwitchesMetric};

class RusageCollector final : public MetricCollector {
 public:
  std::string_view name() const override { return "rusage"; }
  absl::Status Init(const std::vector<base::Device>& devices) override;
  absl::StatusOr<std::unique_ptr<Measurement>> Start(base::Device device) override;
};

}  // namespace kprof::core

// MetricCollector: something that measures a region besides its duration (rusage, hardware
// counters, energy, GPU clocks), one implementation per source, behind one interface.
//
// A collector is initialised once with the devices of a run, then started and stopped around
// each measured region. Start returns a Measurement — the handle of one region — or nullptr
// when the collector cannot measure that device; Stop on the handle returns the metrics.
//
//   KPROF_RETURN_IF_ERROR(collector.Init({device}));
//   KPROF_ASSIGN_OR_RETURN(auto measurement, collector.Start(device));
//   Work();
//   if (measurement) KPROF_ASSIGN_OR_RETURN(MetricMap metrics, measurement->Stop());
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/device.h"
#include "report/metric.h"

namespace kprof::core {

class MetricCollector {
 public:
  // One measured region in progress.
  class Measurement {
   public:
    virtual ~Measurement() = default;
    // Ends the region and returns its metrics. Called at most once.
    virtual absl::StatusOr<report::MetricMap> Stop() = 0;
  };

  virtual ~MetricCollector() = default;

  // The name a request selects the collector by ("rusage", "papi", "perf").
  virtual std::string_view name() const = 0;

  // Prepares to measure `devices`. A collector that cannot measure any of them is not an
  // error: Start says so per device.
  virtual absl::Status Init(const std::vector<base::Device>& devices) = 0;

  // Begins measuring a region on `device` on the calling thread; nullptr when this collector
  // cannot measure `device`.
  virtual absl::StatusOr<std::unique_ptr<Measurement>> Start(base::Device device) = 0;
};

}  // namespace kprof::core

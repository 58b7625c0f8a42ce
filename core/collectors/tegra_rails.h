// Jetson-class boards (NVIDIA Tegra): the INA3221 power rails (the clocks:
// core/host/tegra_clocks.h).
//
// TegraRailsCollector ("rails") samples every rail the board's INA3221 monitors expose (VDD_IN,
// VDD_CPU_GPU_CV, VDD_SOC...; the names vary by board) through the measured region and gives,
// per rail, the energy (µJ, a count) and the average power (W). The monitors give power at an
// instant, so a thread samples them every kRailSamplePeriod and the energy is the integral of
// those samples (trapezoids, from the start to the end of the region). Both sysfs layouts are
// read:
//   hwmon (JetPack 5 and 6):  <root>/ina3221/<bus-addr>/hwmon/hwmon*/in<k>_label, in<k>_input
//                             (mV), curr<k>_input (mA)
//   iio (JetPack 4):          <root>/ina3221x/<bus-addr>/iio:device*/rail_name_<k>,
//                             in_power<k>_input (mW), or in_voltage<k>_input and
//                             in_current<k>_input
// with <root> /sys/bus/i2c/drivers by default; tests give a fake tree shaped like a board's.

#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/collectors/metric_collector.h"
#include "report/metric.h"

namespace kprof::core {

inline constexpr char kI2cDriversRoot[] = "/sys/bus/i2c/drivers";
inline constexpr std::chrono::milliseconds kRailSamplePeriod{5};

struct TegraRail {
  std::string name;  // "VDD_IN"
  // Power from one file (mW), or from voltage (mV) times current (mA).
  std::string power_path, voltage_path, current_path;
};

// The rails under `root` whose readings parse now. A channel without a label, or whose files
// are missing, unreadable or not numbers, is left out.
std::vector<TegraRail> DiscoverTegraRails(const std::string& root = kI2cDriversRoot);

// Whether `root` has INA3221 rail channels at all, readable or not.
bool HasTegraRails(const std::string& root = kI2cDriversRoot);

// Why there is no rail to read under `root` ("" when some rail reads): no INA3221 monitor at
// all (not a Jetson board), or monitors whose readings cannot be read or parsed.
std::string TegraRailsUnavailableReason(const std::string& root = kI2cDriversRoot);

// A rail's power now, in milliwatts; UNAVAILABLE naming the file when it cannot be read.
absl::StatusOr<double> ReadRailMilliwatts(const TegraRail& rail);

// "Energy VDD_IN (uJ)" and "Power VDD_IN (W)".
std::string RailEnergyMetric(const std::string& rail);
std::string RailPowerMetric(const std::string& rail);

class TegraRailsCollector final : public MetricCollector {
 public:
  explicit TegraRailsCollector(std::string root = kI2cDriversRoot) : root_(std::move(root)) {}

  std::string_view name() const override { return "rails"; }

  // FAILED_PRECONDITION with TegraRailsUnavailableReason when no rail reads.
  absl::Status Init(const std::vector<base::Device>& devices) override;

  // The board's power, whatever the device: CPU and GPU share the rails.
  absl::StatusOr<std::unique_ptr<Measurement>> Start(base::Device device) override;

 private:
  std::string root_;
  std::vector<TegraRail> rails_;
};

}  // namespace kprof::core

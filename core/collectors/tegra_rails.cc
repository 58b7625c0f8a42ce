#include "core/collectors/tegra_rails.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/read_file.h"

namespace kprof::core {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> ReadLine(const fs::path& path) {
  std::optional<std::string> line = base::ReadFirstLine(path);
  // A file that holds nothing holds no value either.
  if (line && line->empty()) return std::nullopt;
  return line;
}

std::optional<double> ReadDouble(const fs::path& path) { return base::ReadDecimalFile(path); }

// Every rail channel under `root`, readable or not.
std::vector<TegraRail> AllRails(const std::string& root) {
  std::vector<TegraRail> rails;
  // hwmon: in<k>_label names channel k; in<k>_input is its bus voltage (mV), curr<k>_input its
  // current (mA). Channels without a current (the "sum of shunt voltages") are not rails.
  for (const fs::path& chip : base::DirectoryEntries(fs::path(root) / "ina3221")) {
    for (const fs::path& hwmon : base::DirectoryEntries(chip / "hwmon", "hwmon")) {
      for (int k = 1; k <= 8; ++k) {
        const std::optional<std::string> label = ReadLine(hwmon / absl::StrCat("in", k, "_label"));
        if (!label || label->empty()) continue;
        const fs::path current = hwmon / absl::StrCat("curr", k, "_input");
        if (!fs::exists(current)) continue;
        TegraRail rail;
        rail.name = *label;
        rail.voltage_path = (hwmon / absl::StrCat("in", k, "_input")).string();
        rail.current_path = current.string();
        rails.push_back(std::move(rail));
      }
    }
  }
  // iio (JetPack 4): rail_name_<k>, with power, or voltage and current.
  for (const fs::path& chip : base::DirectoryEntries(fs::path(root) / "ina3221x")) {
    for (const fs::path& iio : base::DirectoryEntries(chip, "iio:device")) {
      for (int k = 0; k <= 8; ++k) {
        const std::optional<std::string> label = ReadLine(iio / absl::StrCat("rail_name_", k));
        if (!label || label->empty()) continue;
        TegraRail rail;
        rail.name = *label;
        const fs::path power = iio / absl::StrCat("in_power", k, "_input");
        if (fs::exists(power)) {
          rail.power_path = power.string();
        } else {
          rail.voltage_path = (iio / absl::StrCat("in_voltage", k, "_input")).string();
          rail.current_path = (iio / absl::StrCat("in_current", k, "_input")).string();
        }
        rails.push_back(std::move(rail));
      }
    }
  }
  return rails;
}

struct RailSample {
  std::chrono::steady_clock::time_point when;
  std::vector<double> milliwatts;
};

// Samples the rails every kRailSamplePeriod from its start to Stop, and integrates.
class RailsMeasurement final : public MetricCollector::Measurement {
 public:
  explicit RailsMeasurement(const std::vector<TegraRail>* rails) : rails_(rails) {
    Sample();
    sampler_ = std::thread([this] {
      std::unique_lock<std::mutex> lock(mutex_);
      while (!stopping_) {
        if (wake_.wait_for(lock, kRailSamplePeriod, [this] { return stopping_; })) break;
        lock.unlock();
        Sample();
        lock.lock();
      }
    });
  }

  ~RailsMeasurement() override { Join(); }

  absl::StatusOr<report::MetricMap> Stop() override {
    Join();
    Sample();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.ok()) return error_;
    const double seconds =
        std::chrono::duration<double>(samples_.back().when - samples_.front().when).count();
    report::MetricMap metrics;
    for (size_t r = 0; r < rails_->size(); ++r) {
      double millijoules = 0;
      for (size_t i = 1; i < samples_.size(); ++i) {
        const double dt =
            std::chrono::duration<double>(samples_[i].when - samples_[i - 1].when).count();
        millijoules += (samples_[i].milliwatts[r] + samples_[i - 1].milliwatts[r]) / 2 * dt;
      }
      const std::string& name = (*rails_)[r].name;
      metrics[RailEnergyMetric(name)] =
          report::Count{static_cast<int64_t>(millijoules * 1e3 + 0.5)};
      if (seconds > 0) metrics[RailPowerMetric(name)] = report::Ratio{millijoules / 1e3 / seconds};
    }
    metrics["Rail samples"] = report::Count{static_cast<int64_t>(samples_.size())};
    return metrics;
  }

 private:
  void Sample() {
    RailSample sample;
    sample.milliwatts.reserve(rails_->size());
    absl::Status failed;
    for (const TegraRail& rail : *rails_) {
      absl::StatusOr<double> mw = ReadRailMilliwatts(rail);
      if (!mw.ok()) {
        failed = mw.status();
        break;
      }
      sample.milliwatts.push_back(*mw);
    }
    sample.when = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failed.ok()) {
      if (error_.ok()) error_ = failed;
      return;
    }
    samples_.push_back(std::move(sample));
  }

  void Join() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (sampler_.joinable()) sampler_.join();
  }

  const std::vector<TegraRail>* rails_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;            // guarded by mutex_
  std::vector<RailSample> samples_;  // guarded by mutex_
  absl::Status error_;               // guarded by mutex_
  std::thread sampler_;
};

}  // namespace

absl::StatusOr<double> ReadRailMilliwatts(const TegraRail& rail) {
  if (!rail.power_path.empty()) {
    const std::optional<double> mw = ReadDouble(rail.power_path);
    if (!mw) {
      return absl::UnavailableError(absl::StrCat("rail ", rail.name, ": ", rail.power_path,
                                                 " is unreadable or not a number"));
    }
    return *mw;
  }
  const std::optional<double> mv = ReadDouble(rail.voltage_path);
  const std::optional<double> ma = ReadDouble(rail.current_path);
  if (!mv || !ma) {
    return absl::UnavailableError(absl::StrCat("rail ", rail.name, ": ",
                                               !mv ? rail.voltage_path : rail.current_path,
                                               " is unreadable or not a number"));
  }
  return *mv * *ma / 1e3;
}

std::vector<TegraRail> DiscoverTegraRails(const std::string& root) {
  std::vector<TegraRail> readable;
  for (TegraRail& rail : AllRails(root)) {
    if (ReadRailMilliwatts(rail).ok()) readable.push_back(std::move(rail));
  }
  return readable;
}

bool HasTegraRails(const std::string& root) { return !AllRails(root).empty(); }

std::string TegraRailsUnavailableReason(const std::string& root) {
  const std::vector<TegraRail> all = AllRails(root);
  if (all.empty()) {
    return absl::StrCat("no INA3221 power monitor under ", root,
                        " (the rails of Jetson boards; not one here)");
  }
  for (const TegraRail& rail : all) {
    const absl::StatusOr<double> mw = ReadRailMilliwatts(rail);
    if (mw.ok()) return "";
    if (&rail == &all.back()) {
      return absl::StrCat("no INA3221 rail could be read: ", mw.status().message());
    }
  }
  return "";
}

std::string RailEnergyMetric(const std::string& rail) {
  return absl::StrCat("Energy ", rail, " (uJ)");
}
std::string RailPowerMetric(const std::string& rail) {
  return absl::StrCat("Power ", rail, " (W)");
}

absl::Status TegraRailsCollector::Init(const std::vector<base::Device>&) {
  rails_ = DiscoverTegraRails(root_);
  if (rails_.empty()) return absl::FailedPreconditionError(TegraRailsUnavailableReason(root_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricCollector::Measurement>> TegraRailsCollector::Start(
    base::Device) {
  if (rails_.empty()) return absl::FailedPreconditionError("collector 'rails' not initialised");
  return std::make_unique<RailsMeasurement>(&rails_);
}

}  // namespace kprof::core

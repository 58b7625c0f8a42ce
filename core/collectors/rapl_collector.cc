#include "core/collectors/rapl_collector.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/read_file.h"

namespace kprof::core {
namespace {

std::string ReadName(const std::filesystem::path& zone) {
  const std::string name = base::ReadFirstLine(zone / "name").value_or("");
  return name.empty() ? zone.filename().string() : name;
}

class RaplMeasurement final : public MetricCollector::Measurement {
 public:
  RaplMeasurement(const std::vector<RaplDomain>* domains, std::vector<uint64_t> start)
      : domains_(domains), start_(std::move(start)), began_(std::chrono::steady_clock::now()) {}

  absl::StatusOr<report::MetricMap> Stop() override {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
    report::MetricMap metrics;
    for (size_t i = 0; i < domains_->size(); ++i) {
      const RaplDomain& domain = (*domains_)[i];
      const std::optional<uint64_t> now = base::ReadCountFile(domain.energy_path);
      if (!now) {
        return absl::UnavailableError(
            absl::StrCat("RAPL counter ", domain.energy_path, " became unreadable"));
      }
      const uint64_t energy_uj = EnergyDelta(start_[i], *now, domain.max_energy_range_uj);
      metrics[RaplEnergyMetric(domain.name)] = report::Count{static_cast<int64_t>(energy_uj)};
      if (seconds > 0) {
        metrics[RaplPowerMetric(domain.name)] =
            report::Ratio{static_cast<double>(energy_uj) / 1e6 / seconds};
      }
    }
    return metrics;
  }

 private:
  const std::vector<RaplDomain>* domains_;
  std::vector<uint64_t> start_;
  std::chrono::steady_clock::time_point began_;
};

}  // namespace

std::vector<RaplDomain> DiscoverRaplDomains(const std::string& root) {
  namespace fs = std::filesystem;
  std::vector<fs::path> zones;
  std::error_code error;
  for (fs::directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    // Top-level zones; subzones ("intel-rapl:0:1") also appear here as links on some kernels,
    // and are reached below through their parent instead.
    if (name.rfind("intel-rapl:", 0) == 0 && std::count(name.begin(), name.end(), ':') == 1) {
      zones.push_back(it->path());
    }
  }
  std::sort(zones.begin(), zones.end());
  std::vector<RaplDomain> domains;
  const auto add = [&](const fs::path& zone, const std::string& name) {
    const std::optional<uint64_t> energy = base::ReadCountFile(zone / "energy_uj");
    const std::optional<uint64_t> range = base::ReadCountFile(zone / "max_energy_range_uj");
    if (!energy || !range || *range == 0) return;
    domains.push_back({name, (zone / "energy_uj").string(), *range});
  };
  for (const fs::path& zone : zones) {
    const std::string package = ReadName(zone);
    add(zone, package);
    std::vector<fs::path> subzones;
    const std::string prefix = zone.filename().string() + ":";
    for (fs::directory_iterator it(zone, error), end; !error && it != end; it.increment(error)) {
      if (it->path().filename().string().rfind(prefix, 0) == 0) subzones.push_back(it->path());
    }
    std::sort(subzones.begin(), subzones.end());
    for (const fs::path& sub : subzones) add(sub, package + "/" + ReadName(sub));
  }
  return domains;
}

bool HasRaplZones(const std::string& root) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    if (it->path().filename().string().rfind("intel-rapl:", 0) == 0) return true;
  }
  return false;
}

std::string RaplUnavailableReason(const std::string& root) {
  if (!DiscoverRaplDomains(root).empty()) return "";
  if (!HasRaplZones(root)) return absl::StrCat("no RAPL domains under ", root, " on this host");
  return absl::StrCat("the RAPL counters under ", root,
                      " are not readable by this process (energy_uj is root-only since the "
                      "kernel's PLATYPUS fix)");
}

uint64_t EnergyDelta(uint64_t before_uj, uint64_t after_uj, uint64_t max_energy_range_uj) {
  if (after_uj >= before_uj) return after_uj - before_uj;
  // The counter ran past its range and restarted from zero. A reading beyond the range is not
  // a wrap the range explains (the counter was reset): count from zero.
  if (before_uj > max_energy_range_uj) return after_uj;
  return max_energy_range_uj - before_uj + after_uj;
}

std::string RaplEnergyMetric(const std::string& domain) {
  return absl::StrCat("Energy ", domain, " (uJ)");
}
std::string RaplPowerMetric(const std::string& domain) {
  return absl::StrCat("Power ", domain, " (W)");
}

absl::Status RaplCollector::Init(const std::vector<base::Device>&) {
  domains_ = DiscoverRaplDomains(root_);
  if (domains_.empty()) {
    return absl::FailedPreconditionError(RaplUnavailableReason(root_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricCollector::Measurement>> RaplCollector::Start(
    base::Device device) {
  if (device.type != base::DeviceType::kCpu) return nullptr;
  std::vector<uint64_t> start;
  start.reserve(domains_.size());
  for (const RaplDomain& domain : domains_) {
    const std::optional<uint64_t> energy = base::ReadCountFile(domain.energy_path);
    if (!energy) {
      return absl::UnavailableError(
          absl::StrCat("RAPL counter ", domain.energy_path, " became unreadable"));
    }
    start.push_back(*energy);
  }
  return std::make_unique<RaplMeasurement>(&domains_, std::move(start));
}

}  // namespace kprof::core

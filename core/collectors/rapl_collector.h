// RaplCollector ("rapl"): the energy the host's packages (and their core, uncore and DRAM
// domains) used over a measured region, from the RAPL counters Linux exposes under
// /sys/class/powercap/intel-rapl:* (AMD processors included). Per domain, energy in microjoules
// (a count, lossless) and the average power in watts; counter wrap-around is undone with the
// domain's max_energy_range_uj.
//
// RAPL counts a whole package, not one thread: other work on the host is in the figure, which
// is why pinning and an idle host matter for it. Since the kernel's PLATYPUS fix, energy_uj is
// readable by root only; where no domain is readable the collector says so at Init.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/collectors/metric_collector.h"

namespace kprof::core {

inline constexpr char kPowercapRoot[] = "/sys/class/powercap";

struct RaplDomain {
  std::string name;  // "package-0", "package-0/core", "package-0/dram"
  std::string energy_path;
  uint64_t max_energy_range_uj = 0;
};

// The domains under `root` whose energy counter this process can read, parents before their
// subdomains. Directories without a readable, numeric energy_uj are left out.
std::vector<RaplDomain> DiscoverRaplDomains(const std::string& root = kPowercapRoot);

// Whether `root` has RAPL zones at all, readable or not.
bool HasRaplZones(const std::string& root = kPowercapRoot);

// Why there is nothing to read under `root`: "" when some domain is readable.
std::string RaplUnavailableReason(const std::string& root = kPowercapRoot);

// The energy counted between two readings, undoing one wrap-around of the counter.
uint64_t EnergyDelta(uint64_t before_uj, uint64_t after_uj, uint64_t max_energy_range_uj);

// "Energy package-0 (uJ)" and "Power package-0 (W)".
std::string RaplEnergyMetric(const std::string& domain);
std::string RaplPowerMetric(const std::string& domain);

class RaplCollector final : public MetricCollector {
 public:
  explicit RaplCollector(std::string root = kPowercapRoot) : root_(std::move(root)) {}

  std::string_view name() const override { return "rapl"; }

  // FAILED_PRECONDITION with RaplUnavailableReason when no domain is readable.
  absl::Status Init(const std::vector<base::Device>& devices) override;

  // Measures host energy for cpu devices; nullptr for others.
  absl::StatusOr<std::unique_ptr<Measurement>> Start(base::Device device) override;

 private:
  std::string root_;
  std::vector<RaplDomain> domains_;
};

}  // namespace kprof::core

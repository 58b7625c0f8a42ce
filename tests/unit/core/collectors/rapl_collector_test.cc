#include "core/collectors/rapl_collector.h"

#include "core/collectors/collector_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};
constexpr uint64_t kRange = 262'143'328'850;  // a real package's max_energy_range_uj

// A tree shaped like /sys/class/powercap on a two-socket host: package 0 with core and dram
// subzones (dram's counter malformed), package 1 without a counter, and an unrelated zone.
class FakePowercap {
 public:
  FakePowercap() {
    Zone("intel-rapl:0", "package-0", "1000");
    Zone("intel-rapl:0/intel-rapl:0:0", "core", std::to_string(kRange - 500));
    Zone("intel-rapl:0/intel-rapl:0:1", "dram", "lots");
    dir_.WriteFile("intel-rapl:1/name", "package-1\n");
    dir_.WriteFile("dtpm/name", "dtpm\n");
  }
  void Zone(const std::string& path, const std::string& name, const std::string& energy) {
    dir_.WriteFile(path + "/name", name + "\n");
    dir_.WriteFile(path + "/energy_uj", energy + "\n");
    dir_.WriteFile(path + "/max_energy_range_uj", std::to_string(kRange) + "\n");
  }
  void SetEnergy(const std::string& path, uint64_t uj) {
    dir_.WriteFile(path + "/energy_uj", std::to_string(uj) + "\n");
  }
  std::string root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

TEST(Rapl, DiscoversReadableDomainsParentsFirst) {
  FakePowercap powercap;
  EXPECT_THAT(DiscoverRaplDomains(powercap.root()),
              ElementsAre(Field(&RaplDomain::name, "package-0"),
                          Field(&RaplDomain::name, "package-0/core")));
  EXPECT_TRUE(HasRaplZones(powercap.root()));
  EXPECT_EQ(RaplUnavailableReason(powercap.root()), "");
}

TEST(Rapl, EnergyDeltaUndoesOneWrap) {
  EXPECT_EQ(EnergyDelta(1000, 3000, kRange), 2000u);
  EXPECT_EQ(EnergyDelta(kRange - 500, 700, kRange), 1200u);
  EXPECT_EQ(EnergyDelta(5, 5, kRange), 0u);
  EXPECT_EQ(EnergyDelta(kRange + 10, 7, kRange), 7u);  // a reset, not a wrap: never negative
}

TEST(Rapl, MeasuresEnergyAndPowerPerDomain) {
  FakePowercap powercap;
  RaplCollector rapl(powercap.root());
  ASSERT_THAT(rapl.Init({kCpu}), IsOk());
  auto measurement = rapl.Start(kCpu);
  ASSERT_THAT(measurement, IsOk());
  ASSERT_NE(*measurement, nullptr);
  powercap.SetEnergy("intel-rapl:0", 3'001'000);           // 3 J
  powercap.SetEnergy("intel-rapl:0/intel-rapl:0:0", 700);  // wrapped: 1200 uJ
  auto metrics = (*measurement)->Stop();
  ASSERT_THAT(metrics, IsOk());
  EXPECT_EQ(metrics->at("Energy package-0 (uJ)"), report::MetricValue(report::Count{3'000'000}));
  EXPECT_EQ(metrics->at("Energy package-0/core (uJ)"), report::MetricValue(report::Count{1200}));
  EXPECT_GT(std::get<report::Ratio>(metrics->at("Power package-0 (W)")).ratio, 0);
  EXPECT_EQ(metrics->count("Energy package-0/dram (uJ)"), 0u);
}

TEST(Rapl, OnlyTheCpuIsMeasured) {
  FakePowercap powercap;
  RaplCollector rapl(powercap.root());
  ASSERT_THAT(rapl.Init({kCpu}), IsOk());
  auto measurement = rapl.Start({base::DeviceType::kCuda, 0});
  ASSERT_THAT(measurement, IsOk());
  EXPECT_EQ(*measurement, nullptr);
}

TEST(Rapl, AbsentIsFailedPreconditionSayingSo) {
  TempDir empty;
  EXPECT_FALSE(HasRaplZones(empty.path() + "/missing"));
  EXPECT_THAT(DiscoverRaplDomains(empty.path()), IsEmpty());
  RaplCollector rapl(empty.path());
  EXPECT_THAT(rapl.Init({kCpu}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no RAPL domains under")));
}

TEST(Rapl, PresentButUnreadableSaysWhy) {
  TempDir root;
  root.WriteFile("intel-rapl:0/name", "package-0\n");
  root.WriteFile("intel-rapl:0/energy_uj", "\n");  // what an unreadable file gives: nothing
  root.WriteFile("intel-rapl:0/max_energy_range_uj", "1000\n");
  EXPECT_TRUE(HasRaplZones(root.path()));
  RaplCollector rapl(root.path());
  EXPECT_THAT(rapl.Init({kCpu}), StatusIs(absl::StatusCode::kFailedPrecondition,
                                          HasSubstr("not readable by this process")));
}

TEST(Rapl, TakesNoOptions) {
  EXPECT_THAT(CreateCollector("rapl:package"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes no options")));
  EXPECT_THAT(CreateCollector("rapl"), IsOk());
}

}  // namespace
}  // namespace kprof::core

#include "core/collectors/tegra_rails.h"

#include <chrono>
#include <filesystem>
#include <thread>

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
constexpr base::Device kCuda{base::DeviceType::kCuda, 0};

// /sys/bus/i2c/drivers on a Jetson Orin (JetPack 5/6, hwmon): one INA3221 with VDD_IN,
// VDD_CPU_GPU_CV and VDD_SOC, and the "sum of shunt voltages" channel, which is no rail.
void OrinRails(const TempDir& dir) {
  const std::string hwmon = "ina3221/1-0040/hwmon/hwmon3/";
  const char* names[] = {"VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"};
  const char* mv[] = {"5000", "4960", "4980"};
  const char* ma[] = {"1000", "500", "250"};
  for (int k = 1; k <= 3; ++k) {
    dir.WriteFile(hwmon + "in" + std::to_string(k) + "_label", std::string(names[k - 1]) + "\n");
    dir.WriteFile(hwmon + "in" + std::to_string(k) + "_input", std::string(mv[k - 1]) + "\n");
    dir.WriteFile(hwmon + "curr" + std::to_string(k) + "_input", std::string(ma[k - 1]) + "\n");
  }
  dir.WriteFile(hwmon + "in7_label", "sum of shunt voltages\n");
  dir.WriteFile(hwmon + "in7_input", "12\n");
}

// Replaces a fake sysfs file whole, as the kernel does: a rewrite in place could be read
// half-written by the sampling thread.
void Replace(const TempDir& dir, const std::string& relative, const std::string& contents) {
  dir.WriteFile(relative + ".new", contents);
  std::filesystem::rename(dir.path() + "/" + relative + ".new", dir.path() + "/" + relative);
}

TEST(TegraRails, FindsAnOrinsRailsByLabel) {
  TempDir dir;
  OrinRails(dir);
  const std::vector<TegraRail> rails = DiscoverTegraRails(dir.path());
  EXPECT_THAT(rails, ElementsAre(Field(&TegraRail::name, "VDD_IN"),
                                 Field(&TegraRail::name, "VDD_CPU_GPU_CV"),
                                 Field(&TegraRail::name, "VDD_SOC")));
  EXPECT_THAT(ReadRailMilliwatts(rails[0]), ::kprof::testing::IsOkAndHolds(5000.0));
  EXPECT_THAT(ReadRailMilliwatts(rails[2]), ::kprof::testing::IsOkAndHolds(4980.0 * 250 / 1000));
  EXPECT_TRUE(HasTegraRails(dir.path()));
  EXPECT_EQ(TegraRailsUnavailableReason(dir.path()), "");
}

// JetPack 4 (Xavier, Nano): iio devices, power in mW or voltage and current.
TEST(TegraRails, FindsTheOlderIioLayout) {
  TempDir dir;
  const std::string iio = "ina3221x/1-0040/iio:device0/";
  dir.WriteFile(iio + "rail_name_0", "GPU\n");
  dir.WriteFile(iio + "in_power0_input", "1500\n");
  dir.WriteFile(iio + "rail_name_1", "CPU\n");
  dir.WriteFile(iio + "in_voltage1_input", "5000\n");
  dir.WriteFile(iio + "in_current1_input", "200\n");
  const std::vector<TegraRail> rails = DiscoverTegraRails(dir.path());
  ASSERT_THAT(rails, ElementsAre(Field(&TegraRail::name, "GPU"), Field(&TegraRail::name, "CPU")));
  EXPECT_THAT(ReadRailMilliwatts(rails[0]), ::kprof::testing::IsOkAndHolds(1500.0));
  EXPECT_THAT(ReadRailMilliwatts(rails[1]), ::kprof::testing::IsOkAndHolds(1000.0));
}

TEST(TegraRails, AbsentUnreadableAndMalformedRailsAreNamed) {
  TempDir none;
  EXPECT_FALSE(HasTegraRails(none.path()));
  EXPECT_THAT(DiscoverTegraRails(none.path()), IsEmpty());
  EXPECT_THAT(TegraRailsUnavailableReason(none.path()), HasSubstr("no INA3221 power monitor"));
  TegraRailsCollector absent(none.path());
  EXPECT_THAT(absent.Init({kCpu}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not one here")));

  TempDir broken;
  const std::string hwmon = "ina3221/1-0040/hwmon/hwmon3/";
  broken.WriteFile(hwmon + "in1_label", "VDD_IN\n");
  broken.WriteFile(hwmon + "in1_input", "five volts\n");  // malformed
  broken.WriteFile(hwmon + "curr1_input", "1000\n");
  broken.WriteFile(hwmon + "in2_label", "VDD_SOC\n");
  broken.WriteFile(hwmon + "in2_input", "5000\n");
  // A directory where the current should be: unreadable, even for root.
  std::filesystem::create_directories(broken.path() + "/" + hwmon + "curr2_input");
  EXPECT_TRUE(HasTegraRails(broken.path()));
  EXPECT_THAT(DiscoverTegraRails(broken.path()), IsEmpty());
  EXPECT_THAT(TegraRailsUnavailableReason(broken.path()),
              HasSubstr("no INA3221 rail could be read"));
  TegraRailsCollector collector(broken.path());
  EXPECT_THAT(collector.Init({kCpu}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("curr2_input")));
}

// Energy is power integrated over the region, sampled through it: a rail that doubles its
// power halfway lands between the two.
TEST(TegraRails, EnergyIsPowerIntegratedOverTheRegion) {
  TempDir dir;
  OrinRails(dir);
  TegraRailsCollector collector(dir.path());
  ASSERT_THAT(collector.Init({kCuda}), IsOk());
  auto measurement = collector.Start(kCuda);
  ASSERT_THAT(measurement, IsOk());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Replace(dir, "ina3221/1-0040/hwmon/hwmon3/curr1_input", "2000\n");  // VDD_IN: 5 W -> 10 W
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto metrics = (*measurement)->Stop();
  ASSERT_THAT(metrics, IsOk());
  const double power = std::get<report::Ratio>(metrics->at("Power VDD_IN (W)")).ratio;
  EXPECT_GT(power, 5.5);
  EXPECT_LT(power, 9.5);
  const int64_t energy = std::get<report::Count>(metrics->at("Energy VDD_IN (uJ)")).value;
  EXPECT_GT(energy, 5.0 * 0.2 * 1e6 * 0.9);  // at least 5 W for 0.2 s, less slack
  EXPECT_GT(std::get<report::Count>(metrics->at("Rail samples")).value, 10);
  // A steady rail reads its steady power.
  EXPECT_NEAR(std::get<report::Ratio>(metrics->at("Power VDD_SOC (W)")).ratio, 4.98 * 0.25, 1e-6);
}

TEST(TegraRails, ARailLostMidMeasurementFailsIt) {
  TempDir dir;
  OrinRails(dir);
  TegraRailsCollector collector(dir.path());
  ASSERT_THAT(collector.Init({kCpu}), IsOk());
  auto measurement = collector.Start(kCpu);
  ASSERT_THAT(measurement, IsOk());
  Replace(dir, "ina3221/1-0040/hwmon/hwmon3/in2_input", "gone\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_THAT((*measurement)->Stop(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("VDD_CPU_GPU_CV")));
}

TEST(TegraRails, IsACollectorByName) {
  auto collector = CreateCollector("rails");
  ASSERT_THAT(collector, IsOk());
  EXPECT_EQ((*collector)->name(), "rails");
}

// A Jetson Orin's devfreq GPU node, CPUs and EMC clock.
}  // namespace
}  // namespace kprof::core

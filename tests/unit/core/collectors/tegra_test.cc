#include "core/collectors/tegra.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "core/collectors/collector_registry.h"
#include "core/host/interference.h"
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

constexpr Device kCpu{DeviceType::kCpu, 0};
constexpr Device kCuda{DeviceType::kCuda, 0};

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
  const double power = std::get<Ratio>(metrics->at("Power VDD_IN (W)")).ratio;
  EXPECT_GT(power, 5.5);
  EXPECT_LT(power, 9.5);
  const int64_t energy = std::get<Count>(metrics->at("Energy VDD_IN (uJ)")).value;
  EXPECT_GT(energy, 5.0 * 0.2 * 1e6 * 0.9);  // at least 5 W for 0.2 s, less slack
  EXPECT_GT(std::get<Count>(metrics->at("Rail samples")).value, 10);
  // A steady rail reads its steady power.
  EXPECT_NEAR(std::get<Ratio>(metrics->at("Power VDD_SOC (W)")).ratio, 4.98 * 0.25, 1e-6);
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
void OrinClocks(const TempDir& dir, bool locked) {
  dir.WriteFile("sys/class/devfreq/17000000.ga10b/cur_freq", "1300500000\n");
  dir.WriteFile("sys/class/devfreq/17000000.ga10b/min_freq",
                locked ? "1300500000\n" : "306000000\n");
  dir.WriteFile("sys/class/devfreq/17000000.ga10b/max_freq", "1300500000\n");
  dir.WriteFile("sys/class/devfreq/3100000.other/cur_freq", "1\n");
  for (int cpu = 0; cpu < 2; ++cpu) {
    const std::string base = "sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq/";
    dir.WriteFile(base + "scaling_min_freq", locked ? "2201600\n" : "729600\n");
    dir.WriteFile(base + "scaling_max_freq", "2201600\n");
  }
  dir.WriteFile("sys/kernel/debug/bpmp/debug/clk/emc/rate", "3199000000\n");
}

TEST(TegraClocks, ReadsLockedClocks) {
  TempDir dir;
  OrinClocks(dir, /*locked=*/true);
  const TegraClocks clocks = ReadTegraClocks(dir.path() + "/");
  EXPECT_TRUE(clocks.is_tegra);
  EXPECT_EQ(clocks.gpu_khz, 1300500);
  EXPECT_EQ(clocks.emc_khz, 3199000);
  EXPECT_TRUE(clocks.locked) << clocks.unlocked_why;
  const MetricMap m = TegraManifest(dir.path() + "/");
  EXPECT_EQ(m.at("GPU frequency (MHz)"), MetricValue(Count{1300}));
  EXPECT_EQ(m.at("EMC frequency (MHz)"), MetricValue(Count{3199}));
  EXPECT_THAT(std::get<std::string>(m.at("Clocks locked")), HasSubstr("yes"));
}

TEST(TegraClocks, SaysWhatIsNotLocked) {
  TempDir dir;
  OrinClocks(dir, /*locked=*/false);
  const TegraClocks clocks = ReadTegraClocks(dir.path() + "/");
  EXPECT_FALSE(clocks.locked);
  EXPECT_THAT(clocks.unlocked_why, HasSubstr("GPU between 306 and 1300 MHz"));
  EXPECT_THAT(clocks.unlocked_why, HasSubstr("cpu0 between 729 and 2201 MHz"));
  EXPECT_THAT(std::get<std::string>(TegraManifest(dir.path() + "/").at("Clocks locked")),
              HasSubstr("jetson_clocks"));
}

TEST(TegraClocks, UnreadableAndMalformedClocksReadUnavailable) {
  TempDir dir;
  dir.WriteFile("sys/class/devfreq/57000000.gpu/cur_freq", "fast\n");
  std::filesystem::create_directories(dir.path() + "/sys/class/devfreq/57000000.gpu/max_freq");
  const MetricMap m = TegraManifest(dir.path() + "/");
  EXPECT_EQ(m.at("GPU frequency (MHz)"), MetricValue(std::string("unavailable")));
  EXPECT_EQ(m.at("GPU frequency max (MHz)"), MetricValue(std::string("unavailable")));
  EXPECT_THAT(std::get<std::string>(m.at("EMC frequency (MHz)")), HasSubstr("root only"));
  EXPECT_THAT(std::get<std::string>(m.at("Clocks locked")), HasSubstr("unreadable"));
}

TEST(TegraClocks, NothingOffTegra) {
  TempDir dir;
  dir.WriteFile("sys/class/devfreq/dmc/cur_freq", "800000000\n");
  EXPECT_FALSE(ReadTegraClocks(dir.path() + "/").is_tegra);
  EXPECT_THAT(TegraManifest(dir.path() + "/"), IsEmpty());
  EXPECT_LT(TegraGpuKhz(dir.path() + "/"), 0);
}

TEST(TegraClocks, AGpuClockChangeDuringAMeasurementIsAWarning) {
  TempDir dir;
  OrinClocks(dir, /*locked=*/false);
  const SystemSample before = SampleSystem(dir.path() + "/", 0);
  EXPECT_EQ(before.gpu_khz, 1300500);
  dir.WriteFile("sys/class/devfreq/17000000.ga10b/cur_freq", "612000000\n");
  const SystemSample after = SampleSystem(dir.path() + "/", 0);
  EXPECT_THAT(InterferenceWarnings(before, after),
              ElementsAre(HasSubstr("the GPU clock moved from 1300 MHz to 612 MHz")));
}

}  // namespace
}  // namespace kprof::core

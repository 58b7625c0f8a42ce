#include "core/host/tegra_clocks.h"

#include <filesystem>

#include "core/host/interference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof::core {
namespace {

using ::kprof::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

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
  const report::MetricMap m = TegraManifest(dir.path() + "/");
  EXPECT_EQ(m.at("GPU frequency (MHz)"), report::MetricValue(report::Count{1300}));
  EXPECT_EQ(m.at("EMC frequency (MHz)"), report::MetricValue(report::Count{3199}));
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
  const report::MetricMap m = TegraManifest(dir.path() + "/");
  EXPECT_EQ(m.at("GPU frequency (MHz)"), report::MetricValue(std::string("unavailable")));
  EXPECT_EQ(m.at("GPU frequency max (MHz)"), report::MetricValue(std::string("unavailable")));
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

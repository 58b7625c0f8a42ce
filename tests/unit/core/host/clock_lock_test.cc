#include "core/host/clock_lock.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::kprof::testing::TempDir;
using ::testing::HasSubstr;

constexpr char kPolicy[] = "sys/devices/system/cpu/cpufreq/policy0/";

std::string Read(const TempDir& dir, const std::string& file) {
  std::ifstream in(dir.path() + "/" + file);
  std::string line;
  std::getline(in, line);
  return line;
}

// One policy over CPUs 0-3: powersave, 800 MHz to 4 GHz, base 2.4 GHz; boost on.
void Cpufreq(const TempDir& dir) {
  const std::string p = kPolicy;
  dir.WriteFile(p + "affected_cpus", "0 1 2 3\n");
  dir.WriteFile(p + "scaling_governor", "powersave\n");
  dir.WriteFile(p + "scaling_available_governors", "performance powersave\n");
  dir.WriteFile(p + "scaling_min_freq", "800000\n");
  dir.WriteFile(p + "scaling_max_freq", "4000000\n");
  dir.WriteFile(p + "cpuinfo_min_freq", "800000\n");
  dir.WriteFile(p + "cpuinfo_max_freq", "4000000\n");
  dir.WriteFile(p + "base_frequency", "2400000\n");
  dir.WriteFile("sys/devices/system/cpu/cpufreq/boost", "1\n");
}

ClockLockOptions Cpu(const TempDir& dir, bool lock) {
  ClockLockOptions options;
  options.device = {base::DeviceType::kCpu, 0};
  options.lock = lock;
  options.sysfs_root = dir.path() + "/";
  options.state_file = dir.path() + "/clocks.json";
  return options;
}

TEST(ClockLock, LocksTheCpusAtTheirBaseFrequencyAndPutsThemBack) {
  TempDir dir;
  Cpufreq(dir);
  const absl::StatusOr<ClockLockOutcome> outcome = LockClocks(Cpu(dir, true));
  ASSERT_THAT(outcome, IsOk());
  EXPECT_TRUE(outcome->locked) << outcome->note;
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_governor"), "performance");
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_min_freq"), "2400000");
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_max_freq"), "2400000");
  EXPECT_EQ(Read(dir, "sys/devices/system/cpu/cpufreq/boost"), "0");
  ASSERT_GE(outcome->settings.size(), 2u);
  EXPECT_EQ(outcome->settings[0].name, "cpu0-3 governor");
  EXPECT_EQ(outcome->settings[0].before, "powersave");
  EXPECT_EQ(outcome->settings[0].during, "performance");
  EXPECT_EQ(outcome->settings[1].before, "800000-4000000");
  EXPECT_EQ(outcome->settings[1].during, "2400000-2400000");
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/clocks.json"));

  const absl::StatusOr<std::string> restored = RestoreClocks(dir.path() + "/clocks.json");
  ASSERT_THAT(restored, IsOk());
  EXPECT_THAT(*restored, HasSubstr("cpu0-3 governor back to powersave"));
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_governor"), "powersave");
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_min_freq"), "800000");
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_max_freq"), "4000000");
  EXPECT_EQ(Read(dir, "sys/devices/system/cpu/cpufreq/boost"), "1");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/clocks.json"));
  // Nothing left to put back: nothing done.
  EXPECT_THAT(RestoreClocks(dir.path() + "/clocks.json"), IsOk());
}

TEST(ClockLock, AFrequencyAskedForIsCheckedAgainstTheCpusRange) {
  TempDir dir;
  Cpufreq(dir);
  ClockLockOptions options = Cpu(dir, true);
  options.mhz = 5000;
  EXPECT_THAT(LockClocks(options), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("outside cpu0-3's range, 800 to 4000 MHz")));
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_governor"), "powersave");
  options.mhz = 3000;
  ASSERT_THAT(LockClocks(options), IsOk());
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_max_freq"), "3000000");
  ASSERT_THAT(RestoreClocks(options.state_file), IsOk());
}

TEST(ClockLock, NoLeaseHoldsAClockBelowTheFloor) {
  TempDir dir;
  Cpufreq(dir);
  ClockLockOptions options = Cpu(dir, true);
  options.mhz = 800;  // the CPUs' minimum, below their base clock
  EXPECT_THAT(LockClocks(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("clock_mhz 800 is below cpu0-3's floor, 2400 MHz (its base "
                                 "clock)")));
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_governor"), "powersave");
  options.floor_mhz = 1000;  // the operator's
  EXPECT_THAT(LockClocks(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("below cpu0-3's floor, 1000 MHz (kprofd --lock-floor-mhz)")));
  options.mhz = 1200;
  ASSERT_THAT(LockClocks(options), IsOk());
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_max_freq"), "1200000");
  ASSERT_THAT(RestoreClocks(options.state_file), IsOk());
}

TEST(ClockLock, OnlyTheCpusTheDaemonMeasuresOnAreSet) {
  TempDir dir;
  Cpufreq(dir);  // policy0: CPUs 0-3
  const std::string p4 = "sys/devices/system/cpu/cpufreq/policy4/";
  dir.WriteFile(p4 + "affected_cpus", "4 5\n");
  dir.WriteFile(p4 + "scaling_governor", "powersave\n");
  dir.WriteFile(p4 + "scaling_min_freq", "800000\n");
  dir.WriteFile(p4 + "scaling_max_freq", "4000000\n");
  dir.WriteFile(p4 + "base_frequency", "2400000\n");
  ClockLockOptions options = Cpu(dir, true);
  options.cpus = {5, 4};
  absl::StatusOr<ClockLockOutcome> outcome = LockClocks(options);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_EQ(Read(dir, p4 + "scaling_governor"), "performance");
  EXPECT_EQ(Read(dir, p4 + "scaling_max_freq"), "2400000");
  // Another policy's CPUs, and the host-wide boost switch: as they were.
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_governor"), "powersave");
  EXPECT_EQ(Read(dir, "sys/devices/system/cpu/cpufreq/boost"), "1");
  ASSERT_THAT(RestoreClocks(options.state_file), IsOk());
  // A policy shared with CPUs it does not measure on is left as it is, saying so.
  options.cpus = {2, 3};
  outcome = LockClocks(options);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_FALSE(outcome->locked);
  EXPECT_THAT(outcome->note, HasSubstr("cpu0-3's clock left as it is: it also runs CPUs kprofd "
                                       "does not measure on (--pin-cpus)"));
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_governor"), "powersave");
  EXPECT_EQ(Read(dir, p4 + "scaling_governor"), "powersave");
  ASSERT_THAT(RestoreClocks(options.state_file), IsOk());
}

TEST(ClockLock, ARefusedChangeUndoesTheOnesBeforeItAndSaysWhy) {
  TempDir dir;
  Cpufreq(dir);
  // The minimum cannot be written (a directory where the attribute should be).
  std::filesystem::remove(dir.path() + "/" + kPolicy + "scaling_min_freq");
  std::filesystem::create_directories(dir.path() + "/" + kPolicy + "scaling_min_freq");
  const absl::StatusOr<ClockLockOutcome> outcome = LockClocks(Cpu(dir, true));
  ASSERT_THAT(outcome, IsOk());
  EXPECT_FALSE(outcome->locked);
  EXPECT_THAT(outcome->note, HasSubstr("not locked: cannot write"));
  EXPECT_THAT(outcome->note, HasSubstr("scaling_min_freq"));
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_governor"), "powersave");
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_max_freq"), "4000000");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/clocks.json"));
  for (const ClockSettingRecord& s : outcome->settings) EXPECT_EQ(s.during, "") << s.name;
}

TEST(ClockLock, RecordingChangesNothing) {
  TempDir dir;
  Cpufreq(dir);
  const absl::StatusOr<ClockLockOutcome> outcome = LockClocks(Cpu(dir, false));
  ASSERT_THAT(outcome, IsOk());
  EXPECT_FALSE(outcome->locked);
  EXPECT_EQ(outcome->settings[0].before, "powersave");
  EXPECT_EQ(outcome->settings[0].during, "");
  EXPECT_EQ(Read(dir, std::string(kPolicy) + "scaling_governor"), "powersave");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/clocks.json"));
}

TEST(ClockLock, AHostWithoutCpufreqSaysSo) {
  TempDir dir;
  const absl::StatusOr<ClockLockOutcome> outcome = LockClocks(Cpu(dir, true));
  ASSERT_THAT(outcome, IsOk());
  EXPECT_FALSE(outcome->locked);
  EXPECT_THAT(outcome->note, HasSubstr("no cpufreq policies"));
}

TEST(ClockLock, ATegraGpuGetsItsFloorAtItsCeilingAsJetsonClocksDoes) {
  TempDir dir;
  const std::string node = "sys/class/devfreq/17000000.ga10b/";
  dir.WriteFile(node + "cur_freq", "306000000\n");
  dir.WriteFile(node + "min_freq", "306000000\n");
  dir.WriteFile(node + "max_freq", "1300500000\n");
  ClockLockOptions options = Cpu(dir, true);
  options.device = {base::DeviceType::kCuda, 0};
  const absl::StatusOr<ClockLockOutcome> outcome = LockClocks(options);
  ASSERT_THAT(outcome, IsOk());
  EXPECT_TRUE(outcome->locked) << outcome->note;
  EXPECT_EQ(Read(dir, node + "min_freq"), "1300500000");
  ASSERT_THAT(RestoreClocks(options.state_file), IsOk());
  EXPECT_EQ(Read(dir, node + "min_freq"), "306000000");
}

TEST(ClockLock, AStateFileItDidNotWriteIsRefusedNamed) {
  TempDir dir;
  dir.WriteFile("clocks.json", "governor=performance\n");
  EXPECT_THAT(
      RestoreClocks(dir.path() + "/clocks.json"),
      StatusIs(absl::StatusCode::kDataLoss, HasSubstr("clocks.json is not what kprofd writes")));
}

}  // namespace
}  // namespace kprof::core

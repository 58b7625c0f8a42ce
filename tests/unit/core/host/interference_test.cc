#include "core/host/interference.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace kprof::core {
namespace {

using ::kprof::testing::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kCpu2Freq[] = "sys/devices/system/cpu/cpu2/cpufreq/scaling_cur_freq";

TEST(Interference, SamplesAFakeTree) {
  TempDir root;
  root.WriteFile("proc/loadavg", "1.25 0.80 0.50 3/412 12345\n");
  root.WriteFile(kCpu2Freq, "2400000\n");
  const SystemSample sample = SampleSystem(root.path() + "/", 2);
  EXPECT_DOUBLE_EQ(sample.load_average, 1.25);
  EXPECT_EQ(sample.cpu, 2);
  EXPECT_EQ(sample.cpu_khz, 2'400'000);
}

TEST(Interference, UnreadableOrMalformedFieldsAreUnknown) {
  TempDir root;
  root.WriteFile("proc/loadavg", "busy\n");
  root.WriteFile(kCpu2Freq, "-5\n");
  const SystemSample sample = SampleSystem(root.path() + "/", 2);
  EXPECT_LT(sample.load_average, 0);
  EXPECT_LT(sample.cpu_khz, 0);
  EXPECT_LT(SampleSystem(root.path() + "/", 7).cpu_khz, 0);  // no such file
}

TEST(Interference, TheRealHostSamplesTheCallingThreadsCpu) {
  const SystemSample sample = SampleSystem();
  EXPECT_GE(sample.load_average, 0);  // Linux always has /proc/loadavg
  EXPECT_GE(sample.cpu, 0);
}

TEST(Interference, LoadMovingBeyondTheThresholdWarns) {
  const SystemSample before{0.10, 0, -1};
  EXPECT_THAT(InterferenceWarnings(before, {0.50, 0, -1}), IsEmpty());
  EXPECT_THAT(InterferenceWarnings(before, {1.60, 0, -1}),
              ElementsAre(HasSubstr("load average moved from 0.10 to 1.60")));
  EXPECT_THAT(InterferenceWarnings({2.0, 0, -1}, {1.0, 0, -1}), SizeIs(1));  // falling, too
  InterferenceThresholds lenient;
  lenient.load_average = 2.0;
  EXPECT_THAT(InterferenceWarnings(before, {1.60, 0, -1}, lenient), IsEmpty());
}

TEST(Interference, TheMeasurementsOwnLoadIsNotInterference) {
  // A minute of one busy thread lifts the one-minute load by up to 1 - 1/e = 0.63.
  const SystemSample before{0.10, 0, -1, 100.0};
  EXPECT_THAT(InterferenceWarnings(before, {0.70, 0, -1, 160.0}), IsEmpty());
  EXPECT_THAT(InterferenceWarnings(before, {1.30, 0, -1, 160.0}),
              ElementsAre(HasSubstr("load average moved from 0.10 to 1.30")));
  // Over a short run the own share is small: the threshold alone decides.
  EXPECT_THAT(InterferenceWarnings(before, {0.65, 0, -1, 101.0}), SizeIs(1));
}

TEST(Interference, ClockMovingBeyondTheThresholdWarns) {
  const SystemSample before{-1, 3, 2'400'000};
  EXPECT_THAT(InterferenceWarnings(before, {-1, 3, 2'350'000}), IsEmpty());  // 2%
  EXPECT_THAT(InterferenceWarnings(before, {-1, 3, 1'800'000}),
              ElementsAre(HasSubstr("clock of CPU 3 moved from 2400 MHz to 1800 MHz")));
  // Unreadable on either side, or different CPUs: nothing to compare.
  EXPECT_THAT(InterferenceWarnings(before, {-1, 3, -1}), IsEmpty());
  EXPECT_THAT(InterferenceWarnings(before, {-1, 1, 1'000'000}), IsEmpty());
}

}  // namespace
}  // namespace kprof::core

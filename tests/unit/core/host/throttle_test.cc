#include "core/host/throttle.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kprof::core {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A monitor of readings given in turn (kHz).
ThrottleMonitor Scripted(std::deque<int64_t>& readings, int64_t nominal = 3'000'000) {
  return ThrottleMonitor(0.75, nominal, [&readings] {
    if (readings.empty()) return int64_t{-1};
    const int64_t khz = readings.front();
    readings.pop_front();
    return khz;
  });
}

TEST(ThrottleMonitor, ARepeatIsThrottledWhenEitherReadingIsBelowTheThreshold) {
  // The first reading is the constructor's probe.
  std::deque<int64_t> readings = {3'000'000,              // probe
                                  3'000'000, 2'900'000,   // repeat 0: fine
                                  2'000'000, 3'000'000,   // repeat 1: low before
                                  3'000'000, 2'249'999,   // repeat 2: low after
                                  2'250'000, 2'250'000,   // repeat 3: at 75%, fine
                                  -1,        3'000'000};  // repeat 4: unreadable
  ThrottleMonitor monitor = Scripted(readings);
  EXPECT_EQ(monitor.unavailable(), "");
  for (int repeat = 0; repeat < 5; ++repeat) {
    monitor.Before();
    monitor.After();
  }
  EXPECT_THAT(monitor.throttled(), ElementsAre(false, true, true, false, false));
  EXPECT_EQ(monitor.count(), 2);
  EXPECT_EQ(monitor.Describe(), "the CPU clock was below 75% of its nominal 3000 MHz");
}

TEST(ThrottleMonitor, WithoutANominalOrAReadableClockItSaysWhyAndMarksNothing) {
  std::deque<int64_t> readings = {1'000'000, 1'000'000, 1'000'000};
  ThrottleMonitor no_nominal = Scripted(readings, -1);
  EXPECT_THAT(no_nominal.unavailable(), HasSubstr("nominal clock is unknown"));
  no_nominal.Before();
  no_nominal.After();
  EXPECT_THAT(no_nominal.throttled(), ElementsAre(false));

  std::deque<int64_t> none;
  ThrottleMonitor unreadable = Scripted(none);
  EXPECT_THAT(unreadable.unavailable(), HasSubstr("clock cannot be read"));
}

TEST(ThrottleMonitor, AGpuClockNamesItselfAndKeepsEachRepeatsReasons) {
  // Before and after each repeat: the clock (kHz) and NVML's reasons.
  std::deque<int64_t> readings = {1'980'000, 1'980'000,  // repeat 0: fine
                                  990'000,   1'980'000,  // repeat 1: low before, held back
                                  500'000,   1'980'000,  // repeat 2: low before, but idle then
                                  1'980'000, 990'000};   // repeat 3: low after
  std::deque<uint64_t> reasons = {0x1, 0x0, 0x40, 0x4, 0x1, 0x0, 0x0, 0x20};
  WatchedClock clock;
  clock.name = "GPU";
  clock.nominal_khz = 1'980'000;
  clock.idle_reasons = 0x1;
  clock.read_khz = [&readings] {
    const int64_t khz = readings.front();
    readings.pop_front();
    return khz;
  };
  clock.read_reasons = [&reasons] {
    const uint64_t mask = reasons.front();
    reasons.pop_front();
    return mask;
  };
  ThrottleMonitor monitor(0.75, std::move(clock));
  EXPECT_EQ(monitor.unavailable(), "");
  for (int repeat = 0; repeat < 4; ++repeat) {
    monitor.Before();
    monitor.After();
  }
  EXPECT_THAT(monitor.throttled(), ElementsAre(false, true, false, true));
  EXPECT_THAT(monitor.reasons(), ElementsAre(0x1, 0x44, 0x1, 0x20));  // before | after
  EXPECT_EQ(monitor.Describe(), "the GPU clock was below 75% of its nominal 1980 MHz");

  WatchedClock absent;
  absent.name = "GPU";
  absent.unavailable = "the GPU's clock cannot be read: no NVML";
  ThrottleMonitor without(0.75, std::move(absent));
  EXPECT_EQ(without.unavailable(), "the GPU's clock cannot be read: no NVML");
  WatchedClock no_reader;
  no_reader.name = "GPU";
  no_reader.nominal_khz = 1'980'000;
  EXPECT_THAT(ThrottleMonitor(0.75, std::move(no_reader)).unavailable(), HasSubstr("no reader"));
  without.Before();
  without.After();
  EXPECT_THAT(without.throttled(), ElementsAre(false));
  EXPECT_THAT(without.reasons(), ElementsAre(0u));
}

TEST(ThrottleMonitor, NominalClockFromSysfs) {
  const std::string root = ::testing::TempDir() + "/throttle_root/";
  const std::string dir = root + "sys/devices/system/cpu/cpu3/cpufreq";
  ASSERT_EQ(std::system(("rm -rf " + root + " && mkdir -p " + dir).c_str()), 0);
  const auto write = [&](const std::string& file, const std::string& text) {
    FILE* f = std::fopen((dir + "/" + file).c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
  };
  EXPECT_EQ(NominalCpuKhz(root, 3), -1);
  write("cpuinfo_max_freq", "3500000\n");
  EXPECT_EQ(NominalCpuKhz(root, 3), 3'500'000);
  write("base_frequency", "2100000\n");  // intel_pstate: the base clock, not the turbo one
  EXPECT_EQ(NominalCpuKhz(root, 3), 2'100'000);
  write("scaling_cur_freq", "1000000\n");
  ThrottleMonitor monitor = ThrottleMonitor::ForCpu(0.75, root, 3);
  EXPECT_EQ(monitor.unavailable(), "");
  monitor.Before();
  monitor.After();
  EXPECT_THAT(monitor.throttled(), ElementsAre(true));
  EXPECT_THAT(ThrottleMonitor::ForCpu(0.75, root, 4).unavailable(), HasSubstr("unknown"));
}

}  // namespace
}  // namespace kprof::core

#include "core/host/interference.h"

#include <sched.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "temp_dir.h"

namespace kprof::core {
namespace {

using ::kprof::testing::TempDir;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kCpu2Freq[] = "sys/devices/system/cpu/cpu2/cpufreq/scaling_cur_freq";

TEST(Interference, SamplesAFakeTree) {
  TempDir root;
  root.WriteFile("proc/loadavg", "1.25 0.80 0.50 3/412 12345\n");
  root.WriteFile(kCpu2Freq, "2400000\n");
  root.WriteFile("proc/thread-self/schedstat", "336173475 88501 29\n");
  const SystemSample sample = SampleSystem(root.path() + "/", 2);
  EXPECT_DOUBLE_EQ(sample.load_average, 1.25);
  EXPECT_EQ(sample.cpu, 2);
  EXPECT_EQ(sample.cpu_khz, 2'400'000);
  EXPECT_EQ(sample.thread_run_ns, 336173475);
  EXPECT_EQ(sample.thread_wait_ns, 88501);
}

TEST(Interference, UnreadableOrMalformedFieldsAreUnknown) {
  TempDir root;
  root.WriteFile("proc/loadavg", "busy\n");
  root.WriteFile(kCpu2Freq, "-5\n");
  root.WriteFile("proc/thread-self/schedstat", "12 -3 1\n");
  const SystemSample sample = SampleSystem(root.path() + "/", 2);
  EXPECT_LT(sample.load_average, 0);
  EXPECT_LT(sample.cpu_khz, 0);
  EXPECT_LT(sample.thread_wait_ns, 0);
  EXPECT_LT(CpuWaitShare(sample, sample), 0);
  EXPECT_LT(SampleSystem(root.path() + "/", 7).cpu_khz, 0);  // no such file
}

TEST(Interference, TheRealHostSamplesTheCallingThreadsCpu) {
  const SystemSample sample = SampleSystem();
  EXPECT_GE(sample.load_average, 0);  // Linux always has /proc/loadavg
  EXPECT_GE(sample.cpu, 0);
  EXPECT_GE(sample.thread_run_ns, 0);  // CONFIG_SCHED_INFO, as every distribution's kernel
  EXPECT_GE(sample.thread_wait_ns, 0);
}

// A thread that spins for `ms` and says what it waited for a CPU meanwhile.
std::pair<double, std::vector<std::string>> Spin(int ms) {
  const SystemSample before = SampleSystem();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until) {
  }
  const SystemSample after = SampleSystem("/", before.cpu);
  return {CpuWaitShare(before, after), InterferenceWarnings(before, after)};
}

TEST(Interference, AThreadThatSharesItsCpuWithBusyOnesSaysTheHostWasBusy) {
  // Every thread of this process on one CPU: the spinning one gets about a third of it beside
  // two others that spin too, however idle the rest of the host is.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  cpu_set_t was;
  ASSERT_EQ(sched_getaffinity(0, sizeof was, &was), 0);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  std::atomic<bool> stop{false};
  std::vector<std::thread> hogs;
  for (int i = 0; i < 2; ++i) {
    hogs.emplace_back([&stop, &one] {
      sched_setaffinity(0, sizeof one, &one);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  const auto [share, warnings] = Spin(300);
  stop = true;
  for (std::thread& hog : hogs) hog.join();
  ASSERT_EQ(sched_setaffinity(0, sizeof was, &was), 0);
  EXPECT_GT(share, 0.3);
  EXPECT_THAT(warnings, Contains(HasSubstr("the host was busy: the measuring thread waited for a "
                                           "CPU")));
}

TEST(Interference, WaitsForACpuBeyondTheThresholdWarn) {
  SystemSample before{0.5, 1, -1, 10.0};
  before.thread_run_ns = 0;
  before.thread_wait_ns = 1'000'000;
  SystemSample after = before;
  after.seconds = 10.1;              // 100 ms
  after.thread_wait_ns = 5'000'000;  // 4 ms waited: 4%
  EXPECT_NEAR(CpuWaitShare(before, after), 0.04, 1e-9);
  EXPECT_THAT(InterferenceWarnings(before, after), IsEmpty());
  after.thread_wait_ns = 31'000'000;  // 30 ms
  EXPECT_THAT(InterferenceWarnings(before, after),
              ElementsAre(HasSubstr("waited for a CPU 30% of the measurement (30.0 ms of 100.0 "
                                    "ms; threshold 5%)")));
  // Under a millisecond of a short measurement (wakeups, the daemon's own threads) is no busy
  // host; a slice of a competing task is.
  after.seconds = 10.003;
  after.thread_wait_ns = before.thread_wait_ns + 300'000;
  EXPECT_GT(CpuWaitShare(before, after), 0.05);
  EXPECT_THAT(InterferenceWarnings(before, after), IsEmpty());
  after.thread_wait_ns = before.thread_wait_ns + 1'500'000;
  EXPECT_THAT(InterferenceWarnings(before, after), SizeIs(1));
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

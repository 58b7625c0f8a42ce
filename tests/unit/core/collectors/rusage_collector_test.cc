#include "core/collectors/rusage_collector.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>

#include "absl/time/clock.h"
#include "fresh_pages.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

int64_t CountOf(const report::MetricMap& m, std::string_view name) {
  return std::get<report::Count>(m.at(std::string(name))).value;
}
double DurationOf(const report::MetricMap& m, std::string_view name) {
  return std::get<report::Duration>(m.at(std::string(name))).microseconds;
}

absl::StatusOr<report::MetricMap> Measure(const std::function<void()>& region) {
  RusageCollector collector;
  if (absl::Status s = collector.Init({kCpu}); !s.ok()) return s;
  auto measurement = collector.Start(kCpu);
  if (!measurement.ok()) return measurement.status();
  region();
  return (*measurement)->Stop();
}

TEST(RusageCollector, ReportsEveryMetric) {
  auto metrics = Measure([] {});
  ASSERT_THAT(metrics, IsOk());
  for (std::string_view name :
       {kUserTimeMetric, kSystemTimeMetric, kMinorFaultsMetric, kMajorFaultsMetric,
        kVoluntarySwitchesMetric, kInvoluntarySwitchesMetric}) {
    EXPECT_EQ(metrics->count(std::string(name)), 1u) << name;
  }
  EXPECT_GE(CountOf(*metrics, kMinorFaultsMetric), 0);
}

TEST(RusageCollector, CountsPageFaultsOfFreshPages) {
  constexpr size_t kPages = 256;
  testing::FreshPages pages(kPages);
  ASSERT_TRUE(pages.ok());
  auto metrics = Measure([&] { pages.Touch(); });
  ASSERT_THAT(metrics, IsOk());
  EXPECT_GE(CountOf(*metrics, kMinorFaultsMetric), static_cast<int64_t>(kPages));
}

TEST(RusageCollector, CountsVoluntarySwitchesOfSleeps) {
  auto metrics = Measure([] {
    for (int i = 0; i < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
  });
  ASSERT_THAT(metrics, IsOk());
  EXPECT_GE(CountOf(*metrics, kVoluntarySwitchesMetric), 3);
}

TEST(RusageCollector, AccountsCpuTimeOfASpinToTheThread) {
  timespec before{}, after{};
  auto metrics = Measure([&] {
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before);
    timespec now{};
    do {
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    } while ((now.tv_sec - before.tv_sec) * 1'000'000'000L + (now.tv_nsec - before.tv_nsec) <
             50'000'000L);
    after = now;
  });
  ASSERT_THAT(metrics, IsOk());
  // getrusage splits the thread's exact run time into user and system by samples; their sum
  // covers the 50 ms the thread provably ran. Half of it leaves room for tick accounting.
  const double cpu_us =
      DurationOf(*metrics, kUserTimeMetric) + DurationOf(*metrics, kSystemTimeMetric);
  EXPECT_GE(cpu_us, 25'000);
}

}  // namespace
}  // namespace kprof::core

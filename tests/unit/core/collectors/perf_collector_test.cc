#include "core/collectors/perf_collector.h"

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/collectors/collector_registry.h"
#include "fresh_pages.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

// Measures `region` with the given events; skips the test where perf is not permitted at all.
absl::StatusOr<report::MetricMap> Measure(const std::vector<std::string>& events,
                                          const std::function<void()>& region) {
  auto collector = PerfCollector::Create(events);
  if (!collector.ok()) return collector.status();
  if (absl::Status s = (*collector)->Init({kCpu}); !s.ok()) return s;
  auto measurement = (*collector)->Start(kCpu);
  if (!measurement.ok()) return measurement.status();
  region();
  return (*measurement)->Stop();
}

// Perf forbidden (paranoid setting, no CAP_PERFMON) or absent (qemu-user, which does not
// emulate perf_event_open): nothing to count here.
#define SKIP_IF_PERF_IS_FORBIDDEN(result)                                                       \
  if (!(result).ok() && absl::IsFailedPrecondition((result).status()) &&                        \
      ((result).status().message().find("not permitted") != std::string_view::npos ||           \
       (result).status().message().find("has no perf_event_open") != std::string_view::npos)) { \
    GTEST_SKIP() << (result).status();                                                          \
  }

TEST(PerfCollector, UnknownOrMissingEventsAreInvalid) {
  EXPECT_THAT(PerfCollector::Create({"task-clock", "cycels"}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown perf event 'cycels' (known: task-clock, page-faults")));
  EXPECT_THAT(PerfCollector::Create({}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs events")));
  EXPECT_THAT(CreateCollector("perf"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(CreateCollector("perf:task-clock,page-faults"), IsOk());
}

TEST(PerfCollector, CountsPageFaultsOfFreshPages) {
  constexpr size_t kPages = 256;
  testing::FreshPages pages(kPages);
  ASSERT_TRUE(pages.ok());
  auto metrics = Measure({"page-faults", "minor-faults"}, [&] { pages.Touch(); });
  SKIP_IF_PERF_IS_FORBIDDEN(metrics);
  ASSERT_THAT(metrics, IsOk());
  EXPECT_GE(std::get<report::Count>(metrics->at("page-faults")).value,
            static_cast<int64_t>(kPages));
  EXPECT_GE(std::get<report::Count>(metrics->at("minor-faults")).value,
            static_cast<int64_t>(kPages));
  EXPECT_EQ(metrics->at(std::string(kPerfRunningRatioMetric)),
            report::MetricValue(report::Ratio{1}));
}

TEST(PerfCollector, TaskClockFollowsASpin) {
  auto metrics = Measure({"task-clock"}, [] {
    timespec start{}, now{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start);
    do {
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    } while ((now.tv_sec - start.tv_sec) * 1'000'000'000L + (now.tv_nsec - start.tv_nsec) <
             50'000'000L);
  });
  SKIP_IF_PERF_IS_FORBIDDEN(metrics);
  ASSERT_THAT(metrics, IsOk());
  // task-clock counts nanoseconds on the CPU: at least the 50 ms the thread provably ran, and
  // not wildly more (generous bounds: this is a shared machine).
  const int64_t ns = std::get<report::Count>(metrics->at("task-clock")).value;
  EXPECT_GE(ns, 45'000'000);
  EXPECT_LE(ns, 5'000'000'000);
}

TEST(PerfCollector, HardwareEventsCountOrSayWhyNot) {
  auto metrics = Measure({"cycles", "instructions"}, [] {
    volatile int sink = 0;
    for (int i = 0; i < 1000000; ++i) sink = sink + i;
  });
  if (metrics.ok()) {
    EXPECT_GT(std::get<report::Count>(metrics->at("instructions")).value, 1'000'000);
  } else {
    EXPECT_THAT(metrics, StatusIs(absl::StatusCode::kFailedPrecondition,
                                  HasSubstr("perf event 'cycles' cannot be counted here")));
  }
}

}  // namespace
}  // namespace kprof::core

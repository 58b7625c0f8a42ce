#include "core/collectors/papi_collector.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "absl/strings/match.h"
#include "core/collectors/collector_registry.h"
#include "core/collectors/perf_collector.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/config.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::Field;
using ::testing::Ge;
using ::testing::HasSubstr;
using ::testing::Le;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};

// Spins until this thread has run `duration` of CPU time: on a loaded host a wall-clock spin
// may get a fraction of that, and task-clock counts CPU time.
void Spin(std::chrono::microseconds duration) {
  const auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
  };
  const auto end = cpu_now() + duration;
  while (cpu_now() < end) {
  }
}

TEST(PapiCollector, EventCountOutOfRangeIsInvalidArgument) {
  EXPECT_THAT(CreateCollector("papi"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes 1 to 32 events")));
  std::string many = "papi:";
  for (int i = 0; i < 33; ++i) many += "PAPI_TOT_CYC,";
  EXPECT_THAT(CreateCollector(many), StatusIs(absl::StatusCode::kInvalidArgument));
}

#if KPROF_HAS_PAPI

TEST(PapiCollector, ComponentsSayWhetherEnabledAndWhyNot) {
  ASSERT_THAT(PapiStatus(), IsOk());
  const std::vector<PapiComponent> components = PapiComponents();
  EXPECT_THAT(components, Contains(Field(&PapiComponent::name, "perf_event")));
  for (const PapiComponent& c : components) {
    EXPECT_EQ(c.enabled, c.reason.empty()) << c.name << ": " << c.reason;
  }
}

// A switch happens in kernel mode: PAPI counts it where this process may count the kernel
// (its default domain, user mode, reads 0), and refuses it, naming it, where it may not.
TEST(PapiCollector, KernelSideSoftwareEventsCountOrAreRefused) {
  auto papi = PapiCollector::Create({"perf::CONTEXT-SWITCHES"});
  ASSERT_THAT(papi, IsOk());
  const absl::Status init = (*papi)->Init({kCpu});
  if (absl::StrContains(init.message(), "component perf_event disabled")) {
    GTEST_SKIP() << "no perf_event here (qemu-user has no perf_event_open): " << init;
  }
  if (!PerfCountsTheKernel()) {
    EXPECT_THAT(init, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("'perf::CONTEXT-SWITCHES' cannot be counted as asked")));
    return;
  }
  if (!init.ok()) GTEST_SKIP() << "PAPI's perf_event component is not here: " << init;
  auto measurement = (*papi)->Start(kCpu);
  ASSERT_THAT(measurement, IsOk());
  for (int i = 0; i < 5; ++i) {
    const timespec ms = {0, 1'000'000};
    nanosleep(&ms, nullptr);
  }
  auto metrics = (*measurement)->Stop();
  ASSERT_THAT(metrics, IsOk());
  EXPECT_GE(std::get<report::Count>(metrics->at("perf::CONTEXT-SWITCHES")).value, 5);
  EXPECT_EQ(std::get<std::string>(metrics->at(std::string(kPapiDomainMetric))), "user and kernel");
}

// Software events count through PAPI's perf_event component everywhere, VMs included: the
// counting path itself, end to end.
TEST(PapiCollector, CountsTaskClockOfASpin) {
  auto papi = PapiCollector::Create({"perf::TASK-CLOCK"});
  ASSERT_THAT(papi, IsOk());
  const absl::Status init = (*papi)->Init({kCpu});
  if (!init.ok()) GTEST_SKIP() << "PAPI cannot count task-clock here: " << init;
  auto measurement = (*papi)->Start(kCpu);
  ASSERT_THAT(measurement, IsOk());
  ASSERT_NE(*measurement, nullptr);
  Spin(std::chrono::milliseconds(3));
  auto metrics = (*measurement)->Stop();
  ASSERT_THAT(metrics, IsOk());
  const int64_t nanos = std::get<report::Count>(metrics->at("perf::TASK-CLOCK")).value;
  EXPECT_THAT(nanos, AllOf(Ge(2'500'000), Le(30'000'000)));
  // Measured again, the same event set starts from zero.
  auto again = (*papi)->Start(kCpu);
  ASSERT_THAT(again, IsOk());
  auto second = (*again)->Stop();
  ASSERT_THAT(second, IsOk());
  EXPECT_LT(std::get<report::Count>(second->at("perf::TASK-CLOCK")).value, nanos);
}

TEST(PapiCollector, NestedRegionsEachCountTheirOwnSpan) {
  auto papi = PapiCollector::Create({"perf::TASK-CLOCK"});
  ASSERT_THAT(papi, IsOk());
  if (!(*papi)->Init({kCpu}).ok()) GTEST_SKIP() << "PAPI cannot count task-clock here";
  auto outer = (*papi)->Start(kCpu);
  ASSERT_THAT(outer, IsOk());
  Spin(std::chrono::milliseconds(2));
  auto inner = (*papi)->Start(kCpu);
  ASSERT_THAT(inner, IsOk());
  Spin(std::chrono::milliseconds(2));
  auto inner_metrics = (*inner)->Stop();
  ASSERT_THAT(inner_metrics, IsOk());
  auto outer_metrics = (*outer)->Stop();
  ASSERT_THAT(outer_metrics, IsOk());
  const int64_t in = std::get<report::Count>(inner_metrics->at("perf::TASK-CLOCK")).value;
  const int64_t out = std::get<report::Count>(outer_metrics->at("perf::TASK-CLOCK")).value;
  EXPECT_GE(in, 1'500'000);
  EXPECT_GE(out, in + 1'500'000);  // the outer region also spans the first spin
  auto cuda = (*papi)->Start({base::DeviceType::kCuda, 0});
  ASSERT_THAT(cuda, IsOk());
  EXPECT_EQ(*cuda, nullptr);  // only the CPU is counted
}

TEST(PapiCollector, AnEventThisHostCannotCountIsFailedPreconditionNamingIt) {
  auto unknown = PapiCollector::Create({"NO_SUCH_EVENT"});
  ASSERT_THAT(unknown, IsOk());
  EXPECT_THAT((*unknown)->Init({kCpu}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("PAPI event 'NO_SUCH_EVENT' cannot be counted"),
                             HasSubstr("PAPI_event_name_to_code"))));
  // Cycles need a PMU: where there is none (these VMs), adding the event fails with PAPI's
  // reason; where there is one, it counts.
  auto cycles = PapiCollector::Create({"PAPI_TOT_CYC"});
  ASSERT_THAT(cycles, IsOk());
  const absl::Status init = (*cycles)->Init({kCpu});
  if (!HostHasCpuPmu()) {
    // PAPI's perf_event component either runs without a PMU, or is off altogether (no
    // perf_event_open, as under qemu-user): either way the error says which.
    EXPECT_THAT(init, StatusIs(absl::StatusCode::kFailedPrecondition,
                               AllOf(HasSubstr("PAPI event 'PAPI_TOT_CYC' cannot be counted"),
                                     AnyOf(HasSubstr("no CPU performance-monitoring unit"),
                                           HasSubstr("component perf_event disabled")))));
  } else {
    ASSERT_THAT(init, IsOk());
    auto measurement = (*cycles)->Start(kCpu);
    ASSERT_THAT(measurement, IsOk());
    Spin(std::chrono::milliseconds(1));
    auto metrics = (*measurement)->Stop();
    ASSERT_THAT(metrics, IsOk());
    EXPECT_GT(std::get<report::Count>(metrics->at("PAPI_TOT_CYC")).value, 0);
  }
}

#else

TEST(PapiCollector, WithoutPapiEveryUseSaysSo) {
  EXPECT_THAT(PapiStatus(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("built without PAPI")));
  EXPECT_THAT(CreateCollector("papi:PAPI_TOT_CYC"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("built without PAPI")));
  EXPECT_TRUE(PapiComponents().empty());
}

#endif

}  // namespace
}  // namespace kprof::core

#include "core/measure/profiler.h"

#include <memory>
#include <string>

#include "core/cuda/cuda_devices.h"
#include "fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::FakeClock;
using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr base::Device kCpu{base::DeviceType::kCpu, 0};
constexpr base::Device kCuda{base::DeviceType::kCuda, 0};

// A collector that counts its measurements and cannot measure CUDA devices.
class CountingCollector final : public MetricCollector {
 public:
  class Run final : public Measurement {
   public:
    explicit Run(int64_t index) : index_(index) {}
    absl::StatusOr<report::MetricMap> Stop() override {
      return report::MetricMap{{"Run", report::Count{index_}}};
    }

   private:
    int64_t index_;
  };

  std::string_view name() const override { return "counting"; }
  absl::Status Init(const std::vector<base::Device>& devices) override {
    init_devices = devices;
    return init_status;
  }
  absl::StatusOr<std::unique_ptr<Measurement>> Start(base::Device device) override {
    if (device.type == base::DeviceType::kCuda) return nullptr;
    return std::make_unique<Run>(starts++);
  }

  std::vector<base::Device> init_devices;
  absl::Status init_status;
  int64_t starts = 0;
};

// Timers for cpu and cuda on one fake clock.
class ProfilerTest : public ::testing::Test {
 protected:
  ProfilerTest() {
    const auto factory = [this](base::Device) -> absl::StatusOr<std::unique_ptr<Timer>> {
      return std::make_unique<CpuTimer>(&clock_);
    };
    timers_.Register(base::DeviceType::kCpu, factory);
    timers_.Register(base::DeviceType::kCuda, factory);
  }

  std::unique_ptr<Profiler> Make(std::vector<base::Device> devices,
                                 std::vector<MetricCollector*> collectors = {},
                                 report::MetricMap configuration = {}) {
    auto profiler = Profiler::Create(std::move(devices), std::move(collectors),
                                     std::move(configuration), &timers_);
    EXPECT_THAT(profiler, IsOk());
    return profiler.ok() ? std::move(*profiler) : nullptr;
  }

  void Advance(int64_t us) { clock_.Advance(absl::Microseconds(us)); }

  FakeClock clock_;
  TimerRegistry timers_;
};

double DurationUs(const report::MetricMap& row) {
  return std::get<report::Duration>(row.at("Duration (us)")).microseconds;
}
double PercentOf(const report::MetricMap& row) {
  return std::get<report::Percent>(row.at("Percent")).percent;
}

TEST_F(ProfilerTest, NestedCallsAreTimedSeparatelyFromTheTotals) {
  auto profiler = Make({kCpu});
  ASSERT_THAT(profiler->Start(), IsOk());
  ASSERT_THAT(profiler->StartCall("outer", kCpu), IsOk());
  Advance(10);
  ASSERT_THAT(profiler->StartCall("inner", kCpu, {{"Argument Shapes", std::string("f32[4]")}}),
              IsOk());
  Advance(30);
  ASSERT_THAT(profiler->StopCall(), IsOk());
  Advance(10);
  ASSERT_THAT(profiler->StopCall(), IsOk());
  Advance(50);
  ASSERT_THAT(profiler->Stop(), IsOk());
  EXPECT_FALSE(profiler->is_running());

  auto report = profiler->GetReport();
  ASSERT_THAT(report, IsOk());
  ASSERT_EQ(report->calls.size(), 2u);                // the totals are not calls
  const report::MetricMap& inner = report->calls[0];  // closed first
  const report::MetricMap& outer = report->calls[1];
  EXPECT_EQ(inner.at("Name"), report::MetricValue(std::string("inner")));
  EXPECT_EQ(inner.at("Argument Shapes"), report::MetricValue(std::string("f32[4]")));
  EXPECT_EQ(inner.at("Device"), report::MetricValue(std::string("cpu0")));
  EXPECT_EQ(inner.at("Count"), report::MetricValue(report::Count{1}));
  EXPECT_DOUBLE_EQ(DurationUs(inner), 30);
  EXPECT_DOUBLE_EQ(PercentOf(inner), 30);
  EXPECT_DOUBLE_EQ(DurationUs(outer), 50);
  EXPECT_DOUBLE_EQ(PercentOf(outer), 50);

  ASSERT_EQ(report->device_metrics.size(), 1u);
  const report::MetricMap& total = report->device_metrics.at("cpu0");
  EXPECT_EQ(total.at("Name"), report::MetricValue(std::string("Total")));
  EXPECT_DOUBLE_EQ(DurationUs(total), 100);
  EXPECT_EQ(total.count("Percent"), 0u);
}

TEST_F(ProfilerTest, PercentIsOfTheLongestDeviceTotal) {
  auto profiler = Make({kCpu, kCuda});
  ASSERT_THAT(profiler->Start(), IsOk());
  ASSERT_THAT(profiler->StartCall("kernel", kCuda), IsOk());
  Advance(25);
  ASSERT_THAT(profiler->StopCall(), IsOk());
  Advance(75);
  ASSERT_THAT(profiler->Stop(), IsOk());
  auto report = profiler->GetReport();
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->device_metrics.size(), 2u);
  EXPECT_DOUBLE_EQ(DurationUs(report->device_metrics.at("cuda0")), 100);
  EXPECT_DOUBLE_EQ(PercentOf(report->calls.at(0)), 25);
  EXPECT_EQ(report->calls.at(0).at("Device"), report::MetricValue(std::string("cuda0")));
}

TEST_F(ProfilerTest, ExtraMetricsFromStartAndStopAndCollectorsJoinTheRow) {
  CountingCollector collector;
  auto profiler = Make({kCpu, kCuda}, {&collector});
  EXPECT_EQ(collector.init_devices, (std::vector<base::Device>{kCpu, kCuda}));
  ASSERT_THAT(profiler->Start(), IsOk());  // cpu total: run 0; cuda total: not measured
  ASSERT_THAT(profiler->StartCall("f", kCpu, {{"A", report::Count{1}}}), IsOk());  // run 1
  ASSERT_THAT(profiler->StopCall({{"B", report::Count{2}}, {"Count", report::Count{7}}}), IsOk());
  ASSERT_THAT(profiler->StartCall("g", kCuda), IsOk());
  ASSERT_THAT(profiler->StopCall(), IsOk());
  ASSERT_THAT(profiler->Stop(), IsOk());
  auto report = profiler->GetReport();
  ASSERT_THAT(report, IsOk());
  const report::MetricMap& f = report->calls.at(0);
  EXPECT_EQ(f.at("A"), report::MetricValue(report::Count{1}));
  EXPECT_EQ(f.at("B"), report::MetricValue(report::Count{2}));
  EXPECT_EQ(f.at("Count"),
            report::MetricValue(report::Count{7}));  // extra metrics override, as the reference
  EXPECT_EQ(f.at("Run"), report::MetricValue(report::Count{1}));
  EXPECT_EQ(report->calls.at(1).count("Run"), 0u);  // the collector cannot measure cuda
  EXPECT_EQ(report->device_metrics.at("cpu0").at("Run"), report::MetricValue(report::Count{0}));
  EXPECT_EQ(report->device_metrics.at("cuda0").count("Run"), 0u);
}

TEST_F(ProfilerTest, ConfigurationHasNumberOfThreadsUnlessGiven) {
  auto profiler = Make({kCpu}, {}, {{"Host", std::string("lab")}});
  ASSERT_THAT(profiler->Start(), IsOk());
  ASSERT_THAT(profiler->Stop(), IsOk());
  auto report = profiler->GetReport();
  ASSERT_THAT(report, IsOk());
  EXPECT_EQ(report->configuration.at("Number of threads"),
            report::MetricValue(report::Count{AvailableCpus()}));
  EXPECT_EQ(report->configuration.at("Host"), report::MetricValue(std::string("lab")));
  EXPECT_GE(AvailableCpus(), 1);

  auto given = Make({kCpu}, {}, {{"Number of threads", report::Count{1}}});
  ASSERT_THAT(given->Start(), IsOk());
  ASSERT_THAT(given->Stop(), IsOk());
  EXPECT_EQ(given->GetReport()->configuration.at("Number of threads"),
            report::MetricValue(report::Count{1}));
}

TEST_F(ProfilerTest, MisuseIsFailedPreconditionNotACrash) {
  auto profiler = Make({kCpu});
  EXPECT_THAT(profiler->StartCall("early", kCpu),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("not running")));
  EXPECT_THAT(profiler->StopCall(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no call open")));
  EXPECT_THAT(profiler->Stop(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(profiler->GetReport(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("before Stop")));
  ASSERT_THAT(profiler->Start(), IsOk());
  EXPECT_THAT(profiler->Start(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_THAT(profiler->StartCall("a", kCpu), IsOk());
  ASSERT_THAT(profiler->StartCall("b", kCpu), IsOk());
  EXPECT_THAT(profiler->Stop(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("2 call(s) still open, innermost 'b'")));
  ASSERT_THAT(profiler->StopCall(), IsOk());
  ASSERT_THAT(profiler->StopCall(), IsOk());
  ASSERT_THAT(profiler->Stop(), IsOk());
  EXPECT_THAT(profiler->Start(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                          HasSubstr("create a new one per run")));
}

TEST_F(ProfilerTest, CreateRejectsNoDevicesAndReportsCollectorInitErrors) {
  EXPECT_THAT(Profiler::Create({}, {}, {}, &timers_),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least one device")));
  CountingCollector broken;
  broken.init_status = absl::FailedPreconditionError("no PMU");
  EXPECT_THAT(
      Profiler::Create({kCpu}, {&broken}, {}, &timers_),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("collector 'counting': no PMU")));
}

// Without a registered timer the device is synchronised around the host clock; where it has no
// device API (a build without CUDA), or the API cannot reach it (no GPU), Start says so.
TEST(Profiler, DeviceWithoutTimerOrApiFailsAtStart) {
  if (CudaDevices().ok()) GTEST_SKIP() << "this host has a CUDA device";
  TimerRegistry empty;
  auto profiler = Profiler::Create({kCuda}, {}, {}, &empty);
  ASSERT_THAT(profiler, IsOk());
  EXPECT_THAT((*profiler)->Start(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace kprof::core

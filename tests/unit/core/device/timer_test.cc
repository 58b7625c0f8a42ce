#include "core/device/timer.h"

#include <string>
#include <vector>

#include "base/log.h"
#include "fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kprof/config.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::FakeClock;
using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::HasSubstr;

// Captures log lines for the lifetime of the object.
class LogCapture {
 public:
  LogCapture() {
    previous_ = base::SetLogSink([this](base::LogSeverity, std::string_view m,
                                        const base::LogFields&) { lines_.emplace_back(m); });
  }
  ~LogCapture() { base::SetLogSink(std::move(previous_)); }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  base::LogSink previous_;
  std::vector<std::string> lines_;
};

TEST(CpuTimer, MeasuresTheClockBetweenStartAndStop) {
  FakeClock clock;
  CpuTimer timer(&clock);
  timer.Start();
  clock.Advance(absl::Microseconds(250));
  timer.Stop();
  clock.Advance(absl::Seconds(1));  // after Stop: not counted
  EXPECT_EQ(timer.ElapsedNanos(), 250'000);
}

TEST(CpuTimer, RealClockNeverGoesBackwards) {
  CpuTimer timer;
  timer.Start();
  timer.Stop();
  EXPECT_GE(timer.ElapsedNanos(), 0);
}

TEST(TimerRegistry, GlobalHasTheCpuTimerAndDoesNotWarn) {
  LogCapture log;
  auto timer = TimerRegistry::Global().Create({base::DeviceType::kCpu, 0});
  ASSERT_THAT(timer, IsOk());
  EXPECT_TRUE(log.lines().empty());
}

TEST(TimerRegistry, RegisteredFactoryIsUsed) {
  FakeClock clock;
  TimerRegistry registry;
  registry.Register(base::DeviceType::kCpu,
                    [&clock](base::Device) -> absl::StatusOr<std::unique_ptr<Timer>> {
                      return std::make_unique<CpuTimer>(&clock);
                    });
  auto timer = registry.Create({base::DeviceType::kCpu, 0});
  ASSERT_THAT(timer, IsOk());
  (*timer)->Start();
  clock.Advance(absl::Nanoseconds(42));
  (*timer)->Stop();
  EXPECT_EQ((*timer)->ElapsedNanos(), 42);
}

TEST(TimerRegistry, TypeWithoutTimerFallsBackAndWarnsOncePerType) {
  LogCapture log;
  TimerRegistry registry;  // nothing registered
  for (int i = 0; i < 3; ++i) {
    auto timer = registry.Create({base::DeviceType::kCpu, 0});
    ASSERT_THAT(timer, IsOk());
    (*timer)->Start();
    (*timer)->Stop();
    EXPECT_GE((*timer)->ElapsedNanos(), 0);
  }
  ASSERT_EQ(log.lines().size(), 1u);
  EXPECT_THAT(log.lines()[0], HasSubstr("no timer for device type 'cpu'"));
}

TEST(TimerRegistry, TypeWithoutTimerOrDeviceApiIsAnError) {
#if KPROF_HAS_CUDA
  GTEST_SKIP() << "every device type has a device API in a build with CUDA";
#endif
  TimerRegistry registry;
  EXPECT_THAT(registry.Create({base::DeviceType::kCuda, 0}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("'cuda'")));
}

}  // namespace
}  // namespace kprof::core

// The NVML collector without a GPU: throttle reasons by name, and NVML's absence said plainly.
// Its measuring path needs an NVIDIA GPU and runs with the gpu tests.
#include "core/collectors/nvml_collector.h"

#include "core/collectors/collector_registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(NvmlCollector, ThrottleReasonsByName) {
  EXPECT_THAT(ThrottleReasonNames(0), IsEmpty());
  EXPECT_THAT(ThrottleReasonNames(0x1), ElementsAre("GpuIdle"));
  EXPECT_THAT(ThrottleReasonNames(0x4 | 0x40), ElementsAre("SwPowerCap", "HwThermalSlowdown"));
  EXPECT_THAT(ThrottleReasonNames(0x8 | 0x1000), ElementsAre("HwSlowdown", "0x1000"));
}

TEST(NvmlCollector, AMissingLibraryOrANonNvmlIsFailedPrecondition) {
  NvmlCollector missing("libkprof-no-such-nvml.so.1");
  EXPECT_THAT(missing.Init({{base::DeviceType::kCuda, 0}}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("libkprof-no-such-nvml.so.1 not found")));
  NvmlCollector libc("libc.so.6");
  EXPECT_THAT(
      libc.Init({{base::DeviceType::kCuda, 0}}),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("libc.so.6 has no nvmlInit_v2")));
  EXPECT_THAT(libc.Start({base::DeviceType::kCpu, 0}), IsOk());  // not measured: nullptr
}

TEST(NvmlCollector, WithoutNvmlTheGpusClockIsNotWatchedAndSaysWhy) {
  const ThrottleMonitor monitor = GpuThrottleMonitor(0.75, 0, "libkprof-no-such-nvml.so.1");
  EXPECT_THAT(monitor.unavailable(), HasSubstr("the GPU's clock cannot be read"));
  EXPECT_THAT(monitor.unavailable(), HasSubstr("libkprof-no-such-nvml.so.1 not found"));
}

TEST(NvmlCollector, ByNameTakesNoOptions) {
  EXPECT_THAT(CreateCollector("nvml:power"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("takes no options")));
  auto nvml = CreateCollector("nvml");
  ASSERT_THAT(nvml, IsOk());
  const absl::Status init = (*nvml)->Init({{base::DeviceType::kCuda, 0}});
  if (init.ok()) GTEST_SKIP() << "this host has NVML";
  EXPECT_THAT(init,
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("libnvidia-ml.so.1")));
}

}  // namespace
}  // namespace kprof::core

#include "base/device.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::base {
namespace {

using ::kprof::testing::StatusIs;
using ::testing::HasSubstr;

constexpr Device kCpu{DeviceType::kCpu, 0};

TEST(ParseDevice, AcceptsTypesWithAndWithoutIndex) {
  EXPECT_EQ(*ParseDevice("cpu"), kCpu);
  EXPECT_EQ(*ParseDevice("cpu:0"), kCpu);
  EXPECT_EQ(*ParseDevice("cuda"), (Device{DeviceType::kCuda, 0}));
  EXPECT_EQ(*ParseDevice("cuda:3"), (Device{DeviceType::kCuda, 3}));
}

TEST(ParseDevice, RejectsMalformedTextSayingWhatIsAccepted) {
  for (const char* bad : {"", "gpu:0", "CPU", "cpu:", "cpu:-1", "cpu:x", "cuda:1a", "cuda:0:1",
                          "cuda:99999999999", " cpu"}) {
    EXPECT_THAT(ParseDevice(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("accepted: cpu, cpu:0, cuda, cuda:N")))
        << bad;
  }
  EXPECT_THAT(ParseDevice("gpu:0"), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("device 'gpu:0' is of an unknown type")));
}

TEST(DeviceNames, ReportAndSpecForms) {
  EXPECT_EQ(DeviceString({DeviceType::kCuda, 1}), "cuda1");
  EXPECT_EQ(DeviceSpec({DeviceType::kCuda, 1}), "cuda:1");
  EXPECT_EQ(DeviceString(kCpu), "cpu0");
  EXPECT_EQ(*ParseDevice(DeviceSpec({DeviceType::kCuda, 7})), (Device{DeviceType::kCuda, 7}));
}

TEST(DeviceType, ValuesAreDlpackCodes) {
  EXPECT_EQ(static_cast<int>(DeviceType::kCpu), 1);   // kDLCPU
  EXPECT_EQ(static_cast<int>(DeviceType::kCuda), 2);  // kDLCUDA
}

}  // namespace
}  // namespace kprof::base

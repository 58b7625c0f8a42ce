#include "server/front/service/batch_dispatch.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kprof::server {
namespace {

using ::testing::ElementsAre;

constexpr size_t kMiB = size_t{1} << 20;

DeviceBacklog Backlog(int busy, size_t waiting, size_t result_bytes = 4096) {
  return DeviceBacklog{busy, std::vector<size_t>(waiting, result_bytes)};
}

TEST(PlanDispatchTest, ADeviceGetsUpToItsShareOfTheStreamsJobs) {
  const DispatchLimits limits;  // 16 a device, 32 MiB held
  EXPECT_THAT(PlanDispatch({Backlog(0, 100)}, 0, 0, limits), ElementsAre(16));
  EXPECT_THAT(PlanDispatch({Backlog(10, 100)}, 0, 0, limits), ElementsAre(6));
  EXPECT_THAT(PlanDispatch({Backlog(16, 100)}, 0, 0, limits), ElementsAre(0));
  EXPECT_THAT(PlanDispatch({Backlog(0, 3)}, 0, 0, limits), ElementsAre(3));  // what it has
  // Each device its own share.
  EXPECT_THAT(PlanDispatch({Backlog(0, 20), Backlog(15, 20), Backlog(0, 0)}, 0, 0, limits),
              ElementsAre(16, 1, 0));
}

TEST(PlanDispatchTest, ResultsThatWouldPassTheBoundWaitOneAtATimeGoes) {
  const DispatchLimits limits{16, 32 * kMiB};
  // Three 10 MiB results fit, a fourth would not.
  EXPECT_THAT(PlanDispatch({Backlog(0, 10, 10 * kMiB)}, 0, 0, limits), ElementsAre(3));
  // What is held already counts: with 25 MiB held, none more beside the one running.
  EXPECT_THAT(PlanDispatch({Backlog(1, 10, 10 * kMiB)}, 25 * kMiB, 0, limits), ElementsAre(0));
  // A device with none of the stream's jobs gets one, however large: it must run some day.
  EXPECT_THAT(PlanDispatch({Backlog(0, 10, 100 * kMiB)}, 25 * kMiB, 0, limits), ElementsAre(1));
  // Devices share the bound, in order.
  EXPECT_THAT(PlanDispatch({Backlog(0, 5, 10 * kMiB), Backlog(2, 5, 10 * kMiB)}, 0, 0, limits),
              ElementsAre(3, 0));
}

TEST(PlanDispatchTest, NothingGoesWhileTheClientHasNotReadWhatIsHeld) {
  const DispatchLimits limits{16, 32 * kMiB};
  EXPECT_THAT(PlanDispatch({Backlog(0, 5), Backlog(0, 5)}, 32 * kMiB, 32 * kMiB, limits),
              ElementsAre(0, 0));
  EXPECT_THAT(PlanDispatch({Backlog(0, 5)}, 32 * kMiB, 32 * kMiB - 1, limits), ElementsAre(1));
}

}  // namespace
}  // namespace kprof::server

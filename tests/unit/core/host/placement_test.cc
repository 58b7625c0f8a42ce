#include "core/host/placement.h"

#include <sched.h>
#include <sys/resource.h>

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"

namespace kprof::core {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::IsOkAndHolds;
using ::kprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(CpuList, ParsesNumbersAndRanges) {
  EXPECT_THAT(ParseCpuList("3"), IsOkAndHolds(ElementsAre(3)));
  EXPECT_THAT(ParseCpuList("0-3,6"), IsOkAndHolds(ElementsAre(0, 1, 2, 3, 6)));
  EXPECT_THAT(ParseCpuList("6,0-1"), IsOkAndHolds(ElementsAre(0, 1, 6)));
  EXPECT_THAT(ParseCpuList("1023"), IsOkAndHolds(ElementsAre(1023)));
}

TEST(CpuList, RejectsWhatIsNotAList) {
  for (const char* bad : {"", "x", "1-", "-1", "3-1", "1024", "1,,2", "0-2,2", "+1", "1.5"}) {
    EXPECT_THAT(ParseCpuList(bad), StatusIs(absl::StatusCode::kInvalidArgument,
                                            HasSubstr("accepted: CPU numbers and ranges")))
        << bad;
  }
}

TEST(CpuList, FormatsRangesCompactly) {
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(FormatCpuList({1, 3, 5}), "1,3,5");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_THAT(ParseCpuList(FormatCpuList({0, 2, 3, 4, 9, 10})),
              IsOkAndHolds(ElementsAre(0, 2, 3, 4, 9, 10)));
}

TEST(Priority, ParsesNiceAndFifoInRange) {
  auto nice = ParsePriority("nice:-5");
  ASSERT_THAT(nice, IsOk());
  EXPECT_EQ(nice->policy, Priority::Policy::kNice);
  EXPECT_EQ(nice->value, -5);
  auto fifo = ParsePriority("fifo:10");
  ASSERT_THAT(fifo, IsOk());
  EXPECT_EQ(fifo->policy, Priority::Policy::kFifo);
  EXPECT_EQ(FormatPriority(*fifo), "fifo:10");
  EXPECT_EQ(ParsePriority("")->policy, Priority::Policy::kInherit);
  for (const char* bad : {"nice", "nice:-21", "nice:20", "fifo:0", "fifo:100", "rr:5", "nice:x"}) {
    EXPECT_THAT(ParsePriority(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nice:N with N from -20")))
        << bad;
  }
}

// Placement applies to the calling thread: each case runs on a thread of its own so the test
// process keeps its own placement.
TEST(Placement, PinsAndLowersPriorityOfTheCallingThread) {
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  std::thread([&] {
    Placement placement;
    placement.cpus = {allowed.back()};
    placement.priority = *ParsePriority("nice:7");
    ASSERT_THAT(ApplyPlacement(placement), IsOk());
    EXPECT_THAT(AllowedCpus(), ElementsAre(allowed.back()));
    EXPECT_EQ(sched_getcpu(), allowed.back());
    EXPECT_EQ(getpriority(PRIO_PROCESS, 0), 7);
  }).join();
  EXPECT_EQ(AllowedCpus(), allowed);  // this thread is untouched
}

TEST(Placement, CheckLeavesTheCallerAlone) {
  Placement placement;
  placement.priority = *ParsePriority("nice:3");
  const int before = getpriority(PRIO_PROCESS, 0);
  EXPECT_THAT(CheckPlacement(placement), IsOk());
  EXPECT_EQ(getpriority(PRIO_PROCESS, 0), before);
}

TEST(Placement, CpusOutsideTheAllowedSetAreFailedPrecondition) {
  Placement placement;
  placement.cpus = {1023};  // no VM here has 1024 CPUs
  EXPECT_THAT(CheckPlacement(placement),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot pin to CPUs 1023: sched_setaffinity")));
}

}  // namespace
}  // namespace kprof::core

#include "server/front/scheduling/pipeline_plan.h"

#include <string>

#include "gtest/gtest.h"

namespace kprof::server {
namespace {

std::string Step(const PipelineView& view) {
  const PipelineStep step = NextPipelineStep(view);
  return std::string(PipelineStepName(step.kind)) + " " + std::to_string(step.count);
}

// A worker holding `live` jobs handed on (all still its own), `own` of its client's queued.
PipelineView Holding(size_t live, size_t own, size_t depth = 8) {
  PipelineView view;
  view.has_worker = true;
  view.depth = depth;
  view.handed_on_live.assign(live, true);
  view.own_queued = own;
  view.any_queued = own > 0;
  return view;
}

TEST(PipelinePlanTest, NothingQueuedAndNoWorkerWaits) { EXPECT_EQ(Step(PipelineView()), "wait 0"); }

TEST(PipelinePlanTest, TheFirstJobGoesAloneSoTheWorkerStartsOnIt) {
  PipelineView view;
  view.any_queued = true;
  EXPECT_EQ(Step(view), "start 1");
}

TEST(PipelinePlanTest, AClientAloneIsFilledUpOnceItsPipelineIsHalfEmpty) {
  EXPECT_EQ(Step(Holding(1, 20)), "fill 7");    // up to the depth
  EXPECT_EQ(Step(Holding(4, 20)), "fill 4");    // half empty: filled again
  EXPECT_EQ(Step(Holding(5, 20)), "wait 0");    // more than half full: one write later
  EXPECT_EQ(Step(Holding(1, 2)), "fill 2");     // what it has
  EXPECT_EQ(Step(Holding(0, 3)), "fill 3");     // an empty pipeline of the same client
  EXPECT_EQ(Step(Holding(1, 5, 1)), "wait 0");  // depth 1: one at a time
  EXPECT_EQ(Step(Holding(0, 5, 1)), "fill 1");
  EXPECT_EQ(Step(Holding(0, 5, 0)), "fill 1");  // a depth below 1 is 1
}

TEST(PipelinePlanTest, AnotherClientWaitsForTheRunningJobAndOneMoreAtMost) {
  PipelineView view = Holding(6, 10);
  view.others_queued = true;
  EXPECT_EQ(Step(view), "take back 2");
  // Taken back already (or answered: cancelled, expired): nothing more to take.
  view.handed_on_live = {true, true, false, false, false, false};
  EXPECT_EQ(Step(view), "wait 0");
  view.handed_on_live = {true, true};
  EXPECT_EQ(Step(view), "wait 0");
  // The pipeline emptied: the device goes to the next client.
  view.handed_on_live.clear();
  EXPECT_EQ(Step(view), "release 0");
}

TEST(PipelinePlanTest, DrainingLetsTheRunningJobFinishAndTakesTheRestBack) {
  PipelineView view = Holding(3, 0);
  view.draining = true;
  EXPECT_EQ(Step(view), "take back 1");
  view.handed_on_live = {true, false, false};
  EXPECT_EQ(Step(view), "wait 0");
  view.handed_on_live.clear();
  EXPECT_EQ(Step(view), "release 0");
}

TEST(PipelinePlanTest, ABrokenWorkerGetsNoMoreJobsAndIsReleasedOnceEmpty) {
  PipelineView view = Holding(2, 5);
  view.worker_broken = true;
  EXPECT_EQ(Step(view), "wait 0");  // its answers are still to be read
  view.handed_on_live.clear();
  EXPECT_EQ(Step(view), "release 0");
}

TEST(PipelinePlanTest, AWorkerWithNothingToDoIsReleased) {
  EXPECT_EQ(Step(Holding(0, 0)), "release 0");
  PipelineView view = Holding(0, 0);
  view.any_queued = true;
  view.others_queued = true;
  EXPECT_EQ(Step(view), "release 0");
}

}  // namespace
}  // namespace kprof::server

namespace kprof::server {
namespace {

TEST(PipelinePlanTest, ALeaseTakesBackWhatTheOtherClientHasNotStartedAndLetsTheDeviceGo) {
  PipelineView view = Holding(4, 10);
  view.leased_away = true;
  view.own_queued = 0;                   // its queued jobs are not its to run under the lease
  EXPECT_EQ(Step(view), "take back 1");  // the running job finishes; the rest go back
  view.handed_on_live = {true, false, false, false};
  EXPECT_EQ(Step(view), "wait 0");  // until the running one is answered
  view.handed_on_live.clear();
  EXPECT_EQ(Step(view), "release 0");
}

}  // namespace
}  // namespace kprof::server

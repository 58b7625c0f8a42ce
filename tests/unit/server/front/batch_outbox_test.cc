#include "server/front/service/batch_outbox.h"

#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace kprof::server {
namespace {

using Update = BatchOutbox::Update;

// An update whose result is `bytes` bytes long.
Update WithResult(size_t bytes) {
  Update update;
  update.set_time_evaluate(std::string(bytes, 'r'));
  return update;
}

TEST(BatchOutboxTest, StampsEachUpdateWithTheProgressAsItWas) {
  BatchOutbox outbox;
  const absl::Time now = absl::Now();
  for (const char* id : {"a", "b"}) {
    outbox.Count(Update::QUEUED);
    outbox.Push(id, Update::QUEUED, {}, now);
  }
  outbox.Count(Update::RUNNING);
  outbox.Push("a", Update::RUNNING, {}, now);
  outbox.Leave(/*was_running=*/true);
  outbox.Count(Update::DONE);
  outbox.Push("a", Update::DONE, WithResult(10), now);
  outbox.Leave(/*was_running=*/false);  // "b" refused on its way to the device
  outbox.Count(Update::FAILED);
  outbox.Push("b", Update::FAILED, {}, now);
  EXPECT_EQ(outbox.size(), 5u);

  const Update first = outbox.TakeMessage();  // one update a message by default
  EXPECT_EQ(first.id(), "a");
  EXPECT_EQ(first.state(), Update::QUEUED);
  EXPECT_EQ(first.progress().queued(), 1);
  EXPECT_EQ(first.more_size(), 0);
  outbox.Written(true);
  for (int i = 0; i < 3; ++i) {
    (void)outbox.TakeMessage();
    outbox.Written(true);
  }
  const Update last = outbox.TakeMessage();
  EXPECT_EQ(last.id(), "b");
  EXPECT_EQ(last.state(), Update::FAILED);
  EXPECT_EQ(last.progress().queued(), 0);
  EXPECT_EQ(last.progress().running(), 0);
  EXPECT_EQ(last.progress().done(), 1);
  EXPECT_EQ(last.progress().failed(), 1);
  outbox.Written(true);
  EXPECT_TRUE(outbox.empty());
  EXPECT_EQ(outbox.bytes(), 0u);
}

TEST(BatchOutboxTest, PutsAsManyUpdatesInAMessageAsTheClientTakesAndTheBytesAllow) {
  BatchOutbox outbox;
  outbox.SetUpdatesPerMessage(3);
  const absl::Time now = absl::Now();
  for (int i = 0; i < 7; ++i) outbox.Push(std::to_string(i), Update::DONE, WithResult(100), now);
  Update message = outbox.TakeMessage();
  EXPECT_EQ(message.id(), "0");
  ASSERT_EQ(message.more_size(), 2);
  EXPECT_EQ(message.more(1).id(), "2");
  EXPECT_EQ(outbox.writing_count(), 3u);
  EXPECT_EQ(outbox.size(), 4u);
  const size_t before = outbox.bytes();
  outbox.Written(true);
  EXPECT_LT(outbox.bytes(), before);  // the message's bytes leave once written

  // Big results: a message stops short of kMaxMessageBytes, but always takes one.
  BatchOutbox big;
  big.SetUpdatesPerMessage(100);
  const size_t third = BatchOutbox::kMaxMessageBytes / 3;
  for (int i = 0; i < 4; ++i) big.Push(std::to_string(i), Update::DONE, WithResult(third), now);
  big.Push("huge", Update::DONE, WithResult(2 * BatchOutbox::kMaxMessageBytes), now);
  EXPECT_EQ(big.TakeMessage().more_size(), 1);  // two thirds and change fit, not three
  big.Written(true);
  EXPECT_EQ(big.TakeMessage().more_size(), 1);
  big.Written(true);
  const Update huge = big.TakeMessage();
  EXPECT_EQ(huge.id(), "huge");
  EXPECT_EQ(huge.more_size(), 0);
}

TEST(BatchOutboxTest, TheUpdatesPerMessageStayWithinOneAndTheLimit) {
  BatchOutbox outbox;
  outbox.SetUpdatesPerMessage(0);
  EXPECT_EQ(outbox.updates_per_message(), 1u);
  outbox.SetUpdatesPerMessage(1'000'000);
  EXPECT_EQ(outbox.updates_per_message(), BatchOutbox::kMaxUpdatesPerMessage);
}

TEST(BatchOutboxTest, HoldsUpdatesForCompanyOnlyWhileMoreAreComing) {
  BatchOutbox outbox;
  const absl::Time t0 = absl::Now();
  outbox.Push("a", Update::DONE, {}, t0);
  absl::Time flush_at;
  // One update a message: never held.
  EXPECT_FALSE(outbox.Hold(true, t0, &flush_at));
  outbox.SetUpdatesPerMessage(100);
  EXPECT_TRUE(outbox.Hold(true, t0, &flush_at));
  EXPECT_EQ(flush_at, t0 + BatchOutbox::kHeldAtMost);
  EXPECT_FALSE(outbox.Hold(/*more_coming=*/false, t0, &flush_at));            // nothing to wait for
  EXPECT_FALSE(outbox.Hold(true, t0 + BatchOutbox::kHeldAtMost, &flush_at));  // waited enough
  // Enough for a message: written at once.
  for (size_t i = 1; i < BatchOutbox::kHeldFor; ++i) outbox.Push("x", Update::DONE, {}, t0);
  EXPECT_FALSE(outbox.Hold(true, t0, &flush_at));
}

TEST(BatchOutboxTest, AFailedWriteDropsEverything) {
  BatchOutbox outbox;
  const absl::Time now = absl::Now();
  outbox.Push("a", Update::DONE, WithResult(50), now);
  outbox.Push("b", Update::DONE, WithResult(50), now);
  (void)outbox.TakeMessage();
  outbox.Written(false);
  EXPECT_TRUE(outbox.empty());
  EXPECT_EQ(outbox.bytes(), 0u);
  EXPECT_EQ(outbox.writing_count(), 0u);
}

}  // namespace
}  // namespace kprof::server

// What one client may take of a daemon's leases: one held and two waiting at most, the device
// passed to another client's waiting lease before its own next one, and an hourly budget.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "lease_fixture.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::testing::HasSubstr;

// A lease of `seconds` on cpu:0 asked for by `client`, refused at once: the stream's status.
grpc::Status Refusal(client::Client& client, double seconds) {
  std::unique_ptr<client::Client::LeaseStream> lease = client.OpenLease();
  v1::LeaseRequest request;
  request.set_device("cpu:0");
  request.set_seconds(seconds);
  if (!lease->stream->Write(request)) return grpc::Status(grpc::StatusCode::UNKNOWN, "no write");
  v1::LeaseUpdate update;
  while (lease->stream->Read(&update)) {
  }
  return lease->stream->Finish();
}

TEST_F(LeaseTest, AClientHoldsOneLeaseAndWaitsForTwoAtMost) {
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  Held held = Ask(*alice, "cpu:0", 60);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED) << held.first.end_reason();
  Held second = Ask(*alice, "cpu:0", 60);
  Held third = Ask(*alice, "cpu:0", 60);
  EXPECT_EQ(second.first.state(), v1::LeaseUpdate::WAITING);
  EXPECT_EQ(third.first.state(), v1::LeaseUpdate::WAITING);
  const grpc::Status refused = Refusal(*alice, 60);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("client 'alice' holds or waits for 3 leases already: one held and 2 "
                        "waiting at most"));
  EXPECT_EQ(Release(third).state(), v1::LeaseUpdate::ENDED);  // a place again
  Held again = Ask(*alice, "cpu:0", 60);
  EXPECT_EQ(again.first.state(), v1::LeaseUpdate::WAITING);
  for (Held* h : {&again, &second, &held}) Release(*h);
}

TEST_F(LeaseTest, TheDeviceGoesToAnotherClientsWaitingLeaseBeforeTheHoldersNextOne) {
  ASSERT_TRUE(Start());
  auto alice = Connect("token-a");
  auto bob = Connect("token-b");
  Held held = Ask(*alice, "cpu:0", 60);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED) << held.first.end_reason();
  Held alice_next = Ask(*alice, "cpu:0", 60);  // asked first
  Held bob_next = Ask(*bob, "cpu:0", 60);
  ASSERT_EQ(bob_next.first.state(), v1::LeaseUpdate::WAITING);
  EXPECT_EQ(Release(held).state(), v1::LeaseUpdate::ENDED);
  v1::LeaseUpdate update;
  ASSERT_TRUE(bob_next.lease->stream->Read(&update));
  EXPECT_EQ(update.state(), v1::LeaseUpdate::GRANTED) << update.end_reason();
  EXPECT_EQ(Release(bob_next).state(), v1::LeaseUpdate::ENDED);
  ASSERT_TRUE(alice_next.lease->stream->Read(&update));
  EXPECT_EQ(update.state(), v1::LeaseUpdate::GRANTED) << update.end_reason();
  Release(alice_next);
}

TEST_F(LeaseTest, AClientsLeasesInAnHourStayWithinItsBudget) {
  ASSERT_TRUE(Start({"--lease-budget", "3s", "--lease-clients", "alice,bob"}));
  auto alice = Connect("token-a");
  Held held = Ask(*alice, "cpu:0", 2);
  ASSERT_EQ(held.first.state(), v1::LeaseUpdate::GRANTED) << held.first.end_reason();
  // 2 s granted of 3: another 2 s is refused now, naming the budget and when there is room.
  const grpc::Status refused = Refusal(*alice, 2);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("client 'alice' was granted leases for 2s of the last hour, and this "
                        "one's 2s would pass its 3s an hour (kprofd --lease-budget): ask again "
                        "after "));
  // A lease released early counts for the time it was held: 1 s more fits.
  EXPECT_EQ(Release(held).state(), v1::LeaseUpdate::ENDED);
  Held short_one = Ask(*alice, "cpu:0", 1);
  EXPECT_EQ(short_one.first.state(), v1::LeaseUpdate::GRANTED) << short_one.first.end_reason();
  Release(short_one);
  // Another client has a budget of its own.
  auto bob = Connect("token-b");
  Held bobs = Ask(*bob, "cpu:0", 2);
  EXPECT_EQ(bobs.first.state(), v1::LeaseUpdate::GRANTED) << bobs.first.end_reason();
  Release(bobs);
}

}  // namespace
}  // namespace kprof

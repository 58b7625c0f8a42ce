#include "server/front/client_turns.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kprof::server {
namespace {

// The order TakeNext gives, as "client:id" words, `after` first being the client just served.
std::vector<std::string> Drain(ClientTurns& turns, std::string after = "") {
  std::vector<std::string> order;
  while (std::optional<ClientTurns::Next> next = turns.TakeNext(after)) {
    order.push_back(next->client + ":" + std::to_string(next->job_id));
    after = next->client;
  }
  return order;
}

TEST(ClientTurnsTest, ClientsTakeTurnsWhateverTheirNumberOfJobs) {
  ClientTurns turns;
  for (uint64_t id = 1; id <= 4; ++id) turns.Add("tuner", id);  // one client's flood
  turns.Add("alice", 5);
  turns.Add("bob", 6);
  turns.Add("alice", 7);
  EXPECT_EQ(turns.size(), 7);
  EXPECT_EQ(Drain(turns), (std::vector<std::string>{"tuner:1", "alice:5", "bob:6", "tuner:2",
                                                    "alice:7", "tuner:3", "tuner:4"}));
  EXPECT_TRUE(turns.empty());
  EXPECT_EQ(turns.size(), 0);
  EXPECT_FALSE(turns.TakeNext("").has_value());
}

TEST(ClientTurnsTest, TheClientJustServedGoesAfterTheOthers) {
  ClientTurns turns;
  turns.Add("a", 1);
  turns.Add("b", 2);
  // "a" was served last (its job ran): "b" goes first though "a" queued first.
  EXPECT_EQ(Drain(turns, "a"), (std::vector<std::string>{"b:2", "a:1"}));
  // Alone, the client just served is served again.
  turns.Add("a", 3);
  EXPECT_EQ(Drain(turns, "a"), (std::vector<std::string>{"a:3"}));
}

TEST(ClientTurnsTest, AJobTakenBackGoesBeforeItsClientsLaterOnes) {
  ClientTurns turns;
  turns.Add("a", 5);
  turns.Add("a", 7);
  turns.Add("a", 3);  // taken back from the worker: submitted before 5 and 7
  turns.Add("a", 6);
  EXPECT_EQ(Drain(turns), (std::vector<std::string>{"a:3", "a:5", "a:6", "a:7"}));
}

TEST(ClientTurnsTest, RemoveTakesAJobOutAndAClientWithoutJobsLosesItsTurn) {
  ClientTurns turns;
  turns.Add("a", 1);
  turns.Add("b", 2);
  turns.Add("a", 3);
  EXPECT_EQ(turns.Remove(2), "b");
  EXPECT_FALSE(turns.Remove(2).has_value());   // gone already
  EXPECT_FALSE(turns.Remove(99).has_value());  // never queued
  EXPECT_FALSE(turns.OthersWaiting("a"));
  EXPECT_FALSE(turns.HasJobs("b"));
  EXPECT_EQ(turns.turns(), (std::deque<std::string>{"a"}));
  EXPECT_EQ(turns.Remove(1), "a");
  EXPECT_EQ(Drain(turns), (std::vector<std::string>{"a:3"}));
}

TEST(ClientTurnsTest, CountsEachClientsJobsAndThoseWithinItsBound) {
  ClientTurns turns;
  turns.Add("a", 1);
  turns.Add("a", 2, /*bounded=*/false);  // a batch stream's, bounded by the stream
  turns.Add("a", 3);
  turns.Add("b", 4, /*bounded=*/false);
  EXPECT_EQ(turns.Queued("a"), 3);
  EXPECT_EQ(turns.Bounded("a"), 2);
  EXPECT_EQ(turns.Queued("b"), 1);
  EXPECT_EQ(turns.Bounded("b"), 0);
  EXPECT_EQ(turns.Queued("nobody"), 0);
  EXPECT_EQ(turns.Bounded("nobody"), 0);
  EXPECT_TRUE(turns.OthersWaiting("a"));
  EXPECT_TRUE(turns.OthersWaiting("nobody"));
  (void)turns.Remove(2);
  EXPECT_EQ(turns.Bounded("a"), 2);
  EXPECT_EQ(turns.Queued("a"), 2);
}

TEST(ClientTurnsTest, TakeAllGivesEveryJobInTurnOrder) {
  ClientTurns turns;
  turns.Add("a", 1);
  turns.Add("a", 2);
  turns.Add("b", 3);
  const std::vector<ClientTurns::Next> all = turns.TakeAll();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].job_id, 1u);
  EXPECT_EQ(all[1].job_id, 3u);
  EXPECT_EQ(all[1].client, "b");
  EXPECT_EQ(all[2].job_id, 2u);
  EXPECT_TRUE(turns.empty());
}

}  // namespace
}  // namespace kprof::server

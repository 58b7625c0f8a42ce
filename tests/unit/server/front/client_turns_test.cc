#include "server/front/scheduling/client_turns.h"

#include <map>
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

// How many of each client's jobs are in the fewest of any `window` consecutive ones of `order`
// (client names), over the stretch where every client still has jobs to come.
std::map<std::string, int> FewestInAnyWindow(const std::vector<std::string>& order, size_t window) {
  std::map<std::string, size_t> last;
  for (size_t i = 0; i < order.size(); ++i) last[order[i]] = i;
  size_t end = order.size();
  for (const auto& [client, at] : last) end = std::min(end, at + 1);
  std::map<std::string, int> fewest;
  for (const auto& [client, at] : last) fewest[client] = static_cast<int>(window);
  for (size_t start = 0; start + window <= end; ++start) {
    std::map<std::string, int> counts;
    for (size_t i = start; i < start + window; ++i) ++counts[order[i]];
    for (auto& [client, n] : fewest) n = std::min(n, counts[client]);
  }
  return fewest;
}

std::vector<std::string> Clients(ClientTurns& turns) {
  std::vector<std::string> order;
  std::string after;
  while (std::optional<ClientTurns::Next> next = turns.TakeNext(after)) {
    order.push_back(next->client);
    after = next->client;
  }
  return order;
}

TEST(ClientTurnsTest, WeightsShareTheDeviceSmoothly) {
  ClientTurns turns;
  uint64_t id = 0;
  for (int i = 0; i < 800; ++i) turns.Add("eight-streams", ++id);
  for (int i = 0; i < 100; ++i) turns.Add("one-stream", ++id);
  std::map<std::string, int> fewest = FewestInAnyWindow(Clients(turns), 20);
  EXPECT_GE(fewest["eight-streams"], 9);
  EXPECT_GE(fewest["one-stream"], 9);

  turns.SetWeights([](const std::string& client) { return client == "heavy" ? 3 : 1; });
  for (int i = 0; i < 800; ++i) turns.Add("heavy", ++id);
  for (int i = 0; i < 100; ++i) turns.Add("light", ++id);
  fewest = FewestInAnyWindow(Clients(turns), 20);
  EXPECT_GE(fewest["heavy"], 14);
  EXPECT_GE(fewest["light"], 4);
  // Weights out of range are clamped, not trusted: 0 is 1.
  turns.SetWeights([](const std::string& client) { return client == "zero" ? 0 : 1; });
  for (int i = 0; i < 10; ++i) turns.Add("zero", ++id);
  for (int i = 0; i < 10; ++i) turns.Add("one", ++id);
  fewest = FewestInAnyWindow(Clients(turns), 4);
  EXPECT_EQ(fewest["zero"], 2);
  EXPECT_EQ(fewest["one"], 2);
}

TEST(ClientTurnsTest, IdleTimeEarnsNoCreditAndJobsTakenBackDoNotJumpTheNewcomer) {
  ClientTurns turns;
  uint64_t id = 0;
  for (int i = 0; i < 50; ++i) turns.Add("busy", ++id);
  for (int i = 0; i < 30; ++i) (void)turns.TakeNext("busy");
  // A newcomer after 30 of busy's jobs does not get 30 in a row: they alternate.
  for (int i = 0; i < 10; ++i) turns.Add("late", ++id);
  std::vector<std::string> order = Clients(turns);
  ASSERT_GE(order.size(), 6u);
  EXPECT_EQ(FewestInAnyWindow(order, 4)["busy"], 2);

  // Jobs handed to a worker are taken back for a newcomer, which goes next all the same.
  ClientTurns back;
  for (uint64_t j = 1; j <= 8; ++j) back.Add("tuner", j);
  for (int i = 0; i < 8; ++i) (void)back.TakeNext("tuner");  // a full pipeline
  back.Add("user", 9);
  for (uint64_t j = 3; j <= 8; ++j) back.Add("tuner", j);
  EXPECT_EQ(Drain(back, "tuner"),
            (std::vector<std::string>{"user:9", "tuner:3", "tuner:4", "tuner:5", "tuner:6",
                                      "tuner:7", "tuner:8"}));
}

TEST(ClientTurnsTest, PriorityOrdersAClientsOwnJobsAndNeverStarvesItsBatchOnes) {
  ClientTurns turns;
  for (uint64_t id = 1; id <= 3; ++id) turns.Add("a", id, true, /*interactive=*/false);
  for (uint64_t id = 10; id <= 19; ++id) turns.Add("a", id, true, /*interactive=*/true);
  // Four interactive ones, then a batch one, while both wait.
  EXPECT_EQ(Drain(turns),
            (std::vector<std::string>{"a:10", "a:11", "a:12", "a:13", "a:1", "a:14", "a:15", "a:16",
                                      "a:17", "a:2", "a:18", "a:19", "a:3"}));
  EXPECT_EQ(turns.size(), 0);
}

TEST(ClientTurnsTest, AClientCannotBuyAShareByCallingItsJobsInteractive) {
  // One client marks every job interactive, the other none: they still take turns, and at 1000
  // to 1 by weight the heavier client still gets its share.
  ClientTurns turns;
  uint64_t id = 0;
  for (int i = 0; i < 60; ++i) turns.Add("greedy", ++id, true, /*interactive=*/true);
  for (int i = 0; i < 60; ++i) turns.Add("tuner", ++id, true, /*interactive=*/false);
  std::map<std::string, int> served;
  std::string after;
  for (int i = 0; i < 60; ++i) {
    const std::optional<ClientTurns::Next> next = turns.TakeNext(after);
    ASSERT_TRUE(next.has_value());
    ++served[next->client];
    after = next->client;
  }
  EXPECT_EQ(served["greedy"], 30);
  EXPECT_EQ(served["tuner"], 30);

  ClientTurns weighted;
  weighted.SetWeights([](const std::string& client) { return client == "heavy" ? 1000 : 1; });
  for (int i = 0; i < 60; ++i) weighted.Add("greedy", ++id, true, /*interactive=*/true);
  for (int i = 0; i < 60; ++i) weighted.Add("heavy", ++id, true, /*interactive=*/false);
  served.clear();
  after.clear();
  for (int i = 0; i < 60; ++i) {
    const std::optional<ClientTurns::Next> next = weighted.TakeNext(after);
    ASSERT_TRUE(next.has_value());
    ++served[next->client];
    after = next->client;
  }
  EXPECT_GE(served["heavy"], 59);
}

}  // namespace
}  // namespace kprof::server

namespace kprof::server {
namespace {

TEST(ClientTurnsTest, ALeaseHolderIsServedAloneWithoutTakingTurns) {
  ClientTurns turns;
  turns.Add("alice", 1);
  turns.Add("holder", 2, true, /*interactive=*/false);
  turns.Add("holder", 3);
  turns.Add("bob", 4);
  // The holder's own jobs, interactive first, whatever the others' turns.
  EXPECT_EQ(turns.TakeNextOf("holder")->job_id, 3u);
  EXPECT_EQ(turns.TakeNextOf("holder")->job_id, 2u);
  EXPECT_FALSE(turns.TakeNextOf("holder").has_value());
  EXPECT_FALSE(turns.HasJobs("holder"));
  // The others' turns are as they were: alice, then bob.
  EXPECT_EQ(turns.TakeNext("")->client, "alice");
  EXPECT_EQ(turns.TakeNext("alice")->client, "bob");
  EXPECT_TRUE(turns.empty());
}

}  // namespace
}  // namespace kprof::server

// The fair share goal through a real daemon: two tuners on one device, one with four batch
// streams of 2000 jobs and one with one stream of 100. While both have work, the jobs the device
// runs alternate between them — counted from the order the daemon ran them (each result's
// timing.sequence), not from wall time: of any 20 consecutive jobs each has at least 9 at equal
// weights, and at 3:1 at least 14 and 4.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/kprof_client.h"
#include "daemon.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "status_matchers.h"
#include "token_clients.h"

namespace kprof {
namespace {

using ::kprof::testing::Daemon;
using ::kprof::testing::IsOk;
using ::kprof::testing::TempDir;

std::vector<v1::BatchJob> Jobs(const std::string& prefix, int count) {
  std::vector<v1::BatchJob> jobs;
  for (int i = 0; i < count; ++i) {
    v1::BatchJob job;
    job.set_id(prefix + std::to_string(i));
    v1::TimeEvaluateRequest* request = job.mutable_time_evaluate();
    request->mutable_call()->set_module_id("builtin");
    request->mutable_call()->set_function("spin_us");
    request->mutable_call()->add_args("float64:20");
    request->set_number(1);
    request->set_repeat(1);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// The fewest jobs each tuner has in any 20 consecutive jobs the device ran while both had work
// (from the small tuner's first job to its last).
std::pair<int, int> FewestInAnyTwenty(const std::map<uint64_t, char>& ran) {
  uint64_t first = 0, last = 0;
  for (const auto& [sequence, tuner] : ran) {
    if (tuner != 'b') continue;
    if (first == 0) first = sequence;
    last = sequence;
  }
  std::vector<char> order;
  for (uint64_t s = first; s <= last; ++s) {
    const auto it = ran.find(s);
    order.push_back(it == ran.end() ? '?' : it->second);
  }
  int fewest_a = 20, fewest_b = 20;
  for (size_t start = 0; start + 20 <= order.size(); ++start) {
    const auto from = order.begin() + static_cast<std::ptrdiff_t>(start);
    fewest_a = std::min(fewest_a, static_cast<int>(std::count(from, from + 20, 'a')));
    fewest_b = std::min(fewest_b, static_cast<int>(std::count(from, from + 20, 'b')));
  }
  return {fewest_a, fewest_b};
}

std::pair<int, int> RunTuners(const std::string& token_lines) {
  TempDir dir;
  std::ofstream(dir.path() + "/tokens") << token_lines;
  chmod(dir.path().c_str(), 0755);
  chmod((dir.path() + "/tokens").c_str(), 0644);
  Daemon daemon;
  EXPECT_TRUE(daemon.Start(dir.path() + "/cache", {"--token-file", dir.path() + "/tokens"}));
  const auto connect = [&](const std::string& token) {
    auto connected = ::kprof::testing::ConnectWithToken(daemon.target(), token);
    EXPECT_THAT(connected, IsOk());
    return connected.ok() ? *std::move(connected) : nullptr;
  };
  absl::Mutex mutex;
  std::map<uint64_t, char> ran;  // sequence -> tuner
  int failed = 0;
  const auto run = [&](char tuner, const std::string& token, std::vector<v1::BatchJob> jobs) {
    auto client = connect(token);
    if (client == nullptr) return;
    const auto note = [&](const v1::BatchUpdate& update) {
      absl::MutexLock lock(&mutex);
      if (update.state() == v1::BatchUpdate::DONE) {
        ran[update.time_evaluate().timing().sequence()] = tuner;
      } else if (update.state() == v1::BatchUpdate::FAILED) {
        ++failed;
      }
    };
    EXPECT_THAT(client->MeasureBatch(jobs,
                                     [&](const v1::BatchUpdate& update) {
                                       note(update);
                                       for (const v1::BatchUpdate& more : update.more()) note(more);
                                     }),
                IsOk());
  };
  std::vector<std::thread> streams;
  // As many streams as a client may open (four), against one.
  for (int s = 0; s < 4; ++s) {
    streams.emplace_back(run, 'a', "token-a", Jobs("a" + std::to_string(s) + "-", 2000));
  }
  // The small tuner joins once the big one's streams have filled the queue.
  absl::SleepFor(absl::Milliseconds(200));
  streams.emplace_back(run, 'b', "token-b", Jobs("b-", 100));
  for (std::thread& t : streams) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(ran.size(), 8100u);
  EXPECT_EQ(ran.count(0), 0u) << "a job ran without its place in the device's order";
  return FewestInAnyTwenty(ran);
}

TEST(FairShareThroughTheDaemon, FourStreamsGetNoMoreThanOneAtEqualWeights) {
  const auto [a, b] = RunTuners("token-a tuner-a\ntoken-b tuner-b\n");
  EXPECT_GE(a, 9);
  EXPECT_GE(b, 9);
}

TEST(FairShareThroughTheDaemon, WeightsThreeToOneGiveFourteenAndFour) {
  const auto [a, b] = RunTuners("token-a tuner-a weight=3\ntoken-b tuner-b\n");
  EXPECT_GE(a, 14);
  EXPECT_GE(b, 4);
}

}  // namespace
}  // namespace kprof

// Interleaved batches: every job's repeats run as jobs of one repeat, in a random order across
// jobs drawn from a seed, and come back merged.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "batch_fixture.h"
#include "cli.h"
#include "client/farm.h"
#include "client/interleave.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "processes.h"
#include "status_matchers.h"

namespace kprof {
namespace {

using ::kprof::testing::IsOk;
using ::kprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

TEST(InterleaveOrder, IsAPermutationReproducibleFromTheSeed) {
  const std::vector<int64_t> repeats = {5, 3, 1, 7};
  const auto order = client::InterleaveOrder(repeats, 42);
  ASSERT_EQ(order.size(), 16u);
  // Every (job, repeat) once, each job's repeats in their own order.
  std::map<size_t, std::vector<int64_t>> seen;
  for (const auto& [job, repeat] : order) seen[job].push_back(repeat);
  EXPECT_THAT(seen[0], ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(seen[1], ElementsAre(0, 1, 2));
  EXPECT_THAT(seen[2], ElementsAre(0));
  EXPECT_THAT(seen[3], ElementsAre(0, 1, 2, 3, 4, 5, 6));
  EXPECT_EQ(client::InterleaveOrder(repeats, 42), order);
  // Another seed, another order; and an order that mixes the jobs, not one after another.
  EXPECT_NE(client::InterleaveOrder(repeats, 43), order);
  size_t switches = 0;
  for (size_t i = 1; i < order.size(); ++i) switches += order[i].first != order[i - 1].first;
  EXPECT_GE(switches, 6u);
  // Over many seeds, each job leads about as often as its share of the repeats says.
  std::vector<int> first(4, 0);
  for (uint64_t seed = 0; seed < 1600; ++seed)
    ++first[client::InterleaveOrder(repeats, seed)[0].first];
  EXPECT_NEAR(first[0], 500, 100);
  EXPECT_NEAR(first[2], 100, 50);
  EXPECT_TRUE(client::InterleaveOrder({}, 1).empty());
}

class InterleaveTest : public BatchTest {
 protected:
  std::vector<v1::BatchJob> Jobs() {
    std::vector<v1::BatchJob> jobs = {BuiltinJob("a", "spin_us", "float64:50"),
                                      BuiltinJob("b", "spin_us", "float64:100"),
                                      BuiltinJob("c", "spin_us", "float64:20")};
    jobs[0].mutable_time_evaluate()->set_repeat(4);
    jobs[1].mutable_time_evaluate()->set_repeat(3);
    jobs[2].mutable_time_evaluate()->set_repeat(2);
    return jobs;
  }
};

TEST_F(InterleaveTest, EachJobsRepeatsComeBackMergedWithTheirPlacesInTheRunOrder) {
  auto farm = client::Farm::Connect(daemon_.target());
  ASSERT_THAT(farm, IsOk());
  const std::vector<v1::BatchJob> jobs = Jobs();
  std::map<std::string, std::vector<v1::BatchUpdate>> updates;
  ASSERT_THAT(client::MeasureInterleaved(
                  **farm, jobs, 7, [&](const v1::BatchUpdate& u) { updates[u.id()].push_back(u); }),
              IsOk());
  ASSERT_EQ(updates.size(), 3u);
  const auto order = client::InterleaveOrder({4, 3, 2}, 7);
  std::set<int32_t> positions;
  const std::map<std::string, double> spin = {{"a", 50e-6}, {"b", 100e-6}, {"c", 20e-6}};
  for (size_t j = 0; j < jobs.size(); ++j) {
    const std::string& id = jobs[j].id();
    const std::vector<v1::BatchUpdate>& u = updates[id];
    ASSERT_EQ(u.back().state(), v1::BatchUpdate::DONE) << id;
    EXPECT_EQ(
        std::count_if(u.begin(), u.end(),
                      [](const v1::BatchUpdate& x) { return x.state() == v1::BatchUpdate::DONE; }),
        1);
    const v1::TimeEvaluateResponse& r = u.back().time_evaluate();
    const int64_t repeats = jobs[j].time_evaluate().repeat();
    ASSERT_EQ(r.seconds_per_call_size(), repeats) << id;
    // The repeats are the job's own kernel: a spin of its length, not another job's (the
    // fastest repeat, which a preempted one cannot move).
    EXPECT_GE(r.statistics().min(), spin.at(id)) << id;
    EXPECT_LT(r.statistics().min(), spin.at(id) + 15e-6) << id;
    EXPECT_EQ(r.statistics().min(),
              *std::min_element(r.seconds_per_call().begin(), r.seconds_per_call().end()));
    // Its repeats' places in the run order are the seed's.
    ASSERT_EQ(r.run_order_size(), repeats);
    std::vector<int32_t> expected;
    for (size_t p = 0; p < order.size(); ++p) {
      if (order[p].first == j) expected.push_back(static_cast<int32_t>(p));
    }
    std::vector<int32_t> got(r.run_order().begin(), r.run_order().end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << id;
    positions.insert(got.begin(), got.end());
  }
  EXPECT_EQ(positions.size(), 9u);  // 0 to 8, each once
}

TEST_F(InterleaveTest, RefusedWhereItCannotCompareLikeWithLike) {
  std::vector<v1::BatchJob> jobs = Jobs();
  const auto nothing = [](const v1::BatchUpdate&) {};
  auto two = client::Farm::Connect(daemon_.target() + "," + daemon_.target());
  ASSERT_THAT(two, IsOk());
  EXPECT_THAT(client::MeasureInterleaved(**two, jobs, 1, nothing),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("names 2 daemons")));
  auto one = client::Farm::Connect(daemon_.target());
  ASSERT_THAT(one, IsOk());
  jobs[1].mutable_time_evaluate()->set_max_relative_stddev(0.01);
  EXPECT_THAT(client::MeasureInterleaved(**one, jobs, 1, nothing),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("job 'b'")));
  jobs = Jobs();
  jobs[2].mutable_time_evaluate()->set_repeat(0);
  EXPECT_THAT(client::MeasureInterleaved(**one, jobs, 1, nothing),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("repeat = 0")));
}

// Randomized layouts survive interleaving: each part, a job of one repeat, takes the layout its
// repeat has in the whole job, so the merged result has the layouts one job of all the repeats
// would have had, each over its repeats.
TEST_F(InterleaveTest, RandomizedLayoutsGoOnAcrossTheParts) {
  std::vector<v1::BatchJob> jobs = Jobs();
  for (v1::BatchJob& job : jobs) {
    job.mutable_time_evaluate()->set_randomize_layout(true);
    job.mutable_time_evaluate()->set_repeats_per_layout(2);
    job.mutable_time_evaluate()->set_repeat(6);
    // Tensors to place: copy's.
    job.mutable_time_evaluate()->mutable_call()->set_function("copy");
    job.mutable_time_evaluate()->mutable_call()->clear_args();
    for (const char* arg : {"float32[4096]:zeros", "float32[4096]:random"}) {
      job.mutable_time_evaluate()->mutable_call()->add_args(arg);
    }
  }
  auto farm = client::Farm::Connect(daemon_.target());
  ASSERT_THAT(farm, IsOk());
  std::map<std::string, v1::BatchUpdate> last;
  ASSERT_THAT(client::MeasureInterleaved(**farm, jobs, 5,
                                         [&](const v1::BatchUpdate& u) { last[u.id()] = u; }),
              IsOk());
  for (const v1::BatchJob& job : jobs) {
    const v1::BatchUpdate& u = last[job.id()];
    ASSERT_EQ(u.state(), v1::BatchUpdate::DONE) << job.id() << ": " << u.message();
    auto whole = client_->TimeEvaluate(job.time_evaluate());
    ASSERT_THAT(whole, IsOk());
    const v1::TimeEvaluateResponse& merged = u.time_evaluate();
    ASSERT_EQ(merged.layouts_size(), 3) << job.id();
    ASSERT_EQ(whole->layouts_size(), 3);
    std::set<std::vector<uint64_t>> distinct;
    for (int l = 0; l < 3; ++l) {
      const std::vector<uint64_t> offsets(merged.layouts(l).offsets().begin(),
                                          merged.layouts(l).offsets().end());
      EXPECT_EQ(offsets, std::vector<uint64_t>(whole->layouts(l).offsets().begin(),
                                               whole->layouts(l).offsets().end()))
          << job.id() << " layout " << l;
      EXPECT_EQ(merged.layouts(l).first_repeat(), 2 * l);
      EXPECT_EQ(merged.layouts(l).repeats(), 2);
      EXPECT_DOUBLE_EQ(merged.layouts(l).median(),
                       (merged.seconds_per_call(2 * l) + merged.seconds_per_call(2 * l + 1)) / 2);
      EXPECT_EQ(merged.layouts(l).index(), l);
      distinct.insert(offsets);
    }
    EXPECT_GE(distinct.size(), 2u) << "the parts all got one layout";
  }
  // A layout taken up in the middle: continued, not begun again.
  v1::TimeEvaluateRequest rest = jobs[0].time_evaluate();
  rest.set_first_layout_repeat(3);
  rest.set_repeat(3);
  auto from_three = client_->TimeEvaluate(rest);
  ASSERT_THAT(from_three, IsOk());
  ASSERT_EQ(from_three->layouts_size(), 2);
  EXPECT_EQ(from_three->layouts(0).repeats(), 1);  // repeat 3: the second of layout 1
  EXPECT_EQ(from_three->layouts(1).first_repeat(), 1);
  EXPECT_EQ(from_three->layouts(1).repeats(), 2);
  const v1::TimeEvaluateResponse& merged = last["a"].time_evaluate();
  for (int l = 0; l < 2; ++l) {
    EXPECT_TRUE(
        std::equal(from_three->layouts(l).offsets().begin(), from_three->layouts(l).offsets().end(),
                   merged.layouts(l + 1).offsets().begin(), merged.layouts(l + 1).offsets().end()));
  }
  rest.set_randomize_layout(false);
  rest.clear_repeats_per_layout();
  EXPECT_THAT(client_->TimeEvaluate(rest),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("first_layout_repeat applies only with randomize_layout")));
  rest.set_randomize_layout(true);
  rest.set_first_layout_repeat(-1);
  EXPECT_THAT(client_->TimeEvaluate(rest),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("first_layout_repeat = -1")));
}

TEST_F(InterleaveTest, TheCliInterleavesFromTheSeedAndAFailedRepeatFailsItsJob) {
  const std::string jobs = dir_.path() + "/jobs.jsonl";
  {
    std::ofstream out(jobs);
    out << R"({"id": "a", "module": "builtin", "function": "spin_us", "args": ["float64:30"], "repeat": 3})"
        << "\n"
        << R"({"id": "b", "module": "builtin", "function": "nop", "repeat": 2})"
        << "\n"
        << R"({"id": "c", "module": "builtin", "function": "no_such", "repeat": 2})"
        << "\n";
  }
  const auto run = [&](const std::string& seed) {
    const auto result = ::kprof::testing::RunKprof(
        daemon_.target(), "batch --interleave " + seed + " " + jobs, dir_.path());
    EXPECT_EQ(result.exit_code, 3) << result.err;  // c fails
    std::map<std::string, Json> by_id;
    std::istringstream in(result.out);
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line);
      by_id[j["id"].get<std::string>()] = j;
    }
    return by_id;
  };
  auto first = run("11");
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first["a"]["status"], "OK");
  EXPECT_EQ(first["a"]["results"].size(), 3u);
  EXPECT_EQ(first["a"]["run_order"].size(), 3u);
  EXPECT_EQ(first["b"]["results"].size(), 2u);
  EXPECT_EQ(first["c"]["status"], "NOT_FOUND");
  EXPECT_THAT(first["c"]["error"].get<std::string>(), HasSubstr("repeat 1 of 2"));
  auto again = run("11");
  EXPECT_EQ(again["a"]["run_order"], first["a"]["run_order"]);
  EXPECT_EQ(again["b"]["run_order"], first["b"]["run_order"]);
  // Two daemons: refused, naming why.
  const auto refused = ::kprof::testing::RunKprof(daemon_.target() + "," + daemon_.target(),
                                                  "batch --interleave 1 " + jobs, dir_.path());
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.err, HasSubstr("one machine"));
}

// Parts are sent a chunk at a time: a run of three chunks and more comes back whole, each job's
// repeats in the places the seed gives them.
TEST_F(InterleaveTest, ARunOfSeveralChunksComesBackWhole) {
  std::vector<v1::BatchJob> jobs = {BuiltinJob("x", "nop", ""), BuiltinJob("y", "nop", ""),
                                    BuiltinJob("z", "nop", "")};
  for (v1::BatchJob& job : jobs) {
    job.mutable_time_evaluate()->clear_call();
    job.mutable_time_evaluate()->mutable_call()->set_module_id("builtin");
    job.mutable_time_evaluate()->mutable_call()->set_function("nop");
    job.mutable_time_evaluate()->set_repeat(3000);
  }
  auto farm = client::Farm::Connect(daemon_.target());
  ASSERT_THAT(farm, IsOk());
  std::map<std::string, v1::BatchUpdate> done;
  ASSERT_THAT(client::MeasureInterleaved(**farm, jobs, 3,
                                         [&](const v1::BatchUpdate& u) {
                                           if (u.state() != v1::BatchUpdate::RUNNING) {
                                             EXPECT_TRUE(done.emplace(u.id(), u).second) << u.id();
                                           }
                                         }),
              IsOk());
  ASSERT_EQ(done.size(), 3u);
  const std::vector<uint32_t> slots = client::InterleaveSlots({3000, 3000, 3000}, 3);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const v1::BatchUpdate& u = done.at(jobs[j].id());
    ASSERT_EQ(u.state(), v1::BatchUpdate::DONE) << u.message();
    EXPECT_EQ(u.time_evaluate().seconds_per_call_size(), 3000);
    std::vector<int32_t> expected;
    for (size_t p = 0; p < slots.size(); ++p) {
      if (slots[p] == j) expected.push_back(static_cast<int32_t>(p));
    }
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), u.time_evaluate().run_order().begin(),
                           u.time_evaluate().run_order().end()))
        << jobs[j].id();
  }
}

// 100 jobs of 100 000 repeats, within the documented limits, once built ten million parts
// (5.4 GB) before sending one: the CLI now holds a chunk of them while the first run.
TEST_F(InterleaveTest, TenMillionRepeatsAreSentAChunkAtATimeNotBuiltFirst) {
  if (!::kprof::testing::kResidentMeansHeld) GTEST_SKIP() << "resident size is no measure here";
  const std::string jobs = dir_.path() + "/many.jsonl";
  {
    std::ofstream out(jobs);
    for (int j = 0; j < 100; ++j) {
      out << R"({"id": "j)" << j
          << R"(", "module": "builtin", "function": "nop", "repeat": 100000})"
          << "\n";
    }
  }
  const std::string kprof = ::kprof::testing::KprofPath();
  const std::string target = daemon_.target();
  std::vector<std::string> args = {kprof, "--target", target, "batch", "--interleave", "5", jobs};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t quiet;
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, kprof.c_str(), &quiet, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&quiet);
  ASSERT_EQ(spawned, 0);
  int64_t peak_kb = 0;
  for (int tenth = 0; tenth < 40; ++tenth) {  // 4 s: the old way had built millions of parts
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    peak_kb = std::max(peak_kb, ::kprof::testing::PeakResidentKb(pid));
  }
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, WNOHANG), 0) << "kprof ended early, status " << status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  EXPECT_GT(peak_kb, 0);
  EXPECT_LT(peak_kb, 200 * 1024) << "kprof batch --interleave held " << peak_kb / 1024 << " MB";
}

}  // namespace
}  // namespace kprof
